"""Research comparisons (issue 33 items 2 and 3): seeds as an axis with paired statistics over seeds, and where
pairs of runs part, the framework pairs beside the summation-order pairs. The statistics and the divergence are
checked on synthetic numbers with known answers (no framework); one small ``multigpu compare --seeds`` run per
backend checks that they reach the table, results.json and the plots."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from toolkit.command.compare_tables import first_in
from toolkit.command.divergence import (
    first_step_past,
    pair_kind,
    pair_record,
    relative_divergence,
    summarize_kinds,
    summarize_pairs,
)
from toolkit.command.main import main
from toolkit.command.seed_stats import (
    compare_over_seeds,
    paired_difference,
    parted_test,
    parted_words,
    seed_statistics,
    sign_test,
    t_quantile,
)
from toolkit.command.seeds import RunSeeds, parse_seeds, run_seeds, seed_trainer
from toolkit.nn.model import Model, State

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------------------------------------------------
# Statistics over seeds

@pytest.mark.parametrize("p, df, expected", [
    (0.975, 1, 12.7062), (0.975, 4, 2.7764), (0.975, 9, 2.2622), (0.975, 29, 2.0452), (0.95, 9, 1.8331),
    (0.995, 4, 4.6041), (0.9995, 1, 636.6192), (0.5, 3, 0.0),
])
def test_t_quantiles_are_the_tables(p, df, expected):
    assert t_quantile(p, df) == pytest.approx(expected, abs=1e-4)


def test_t_quantile_refuses_what_it_cannot_give():
    for p, df in ((0.4, 3), (1.0, 3), (0.975, 0)):
        with pytest.raises(ValueError, match="expected 0.5 <= p < 1 and df >= 1"):
            t_quantile(p, df)


def test_paired_difference_is_the_t_interval_of_the_differences():
    stats = paired_difference([11.0, 12.0, 13.0, 14.0, 15.0], [10.0] * 5)  # differences 1..5
    half = 2.776445 * math.sqrt(2.5) / math.sqrt(5)  # t(0.975, 4) * sd / sqrt(n)
    assert stats["seeds"] == 5 and stats["mean_difference"] == pytest.approx(3.0)
    assert stats["sd_difference"] == pytest.approx(math.sqrt(2.5))
    assert (stats["low"], stats["high"]) == pytest.approx((3.0 - half, 3.0 + half), rel=1e-6)
    one = paired_difference([2.0], [1.5])
    assert one["mean_difference"] == 0.5 and one["low"] is None and one["sd_difference"] is None


def test_a_paired_gap_is_seen_through_a_large_seed_spread():
    """The point of pairing: seeds spread the metric widely, the backends differ by a constant 0.01 on every seed;
    the interval is tight around 0.01 and excludes 0, while the gap is a small fraction of the spread."""
    a = [0.50, 0.80, 0.60, 0.90, 0.70]
    b = [value - 0.01 for value in a]
    stats = compare_over_seeds(a, b)
    assert stats["mean_difference"] == pytest.approx(0.01) and stats["low"] > 0
    assert stats["high"] - stats["low"] < 1e-9  # the same gap on every seed
    assert stats["seed_spread"] == pytest.approx(np.std(a, ddof=1)) and stats["gap_over_spread"] < 0.1
    pooled = compare_over_seeds([1.0, 3.0], [2.0, 6.0])  # deviations sqrt(2) and sqrt(8): pooled sqrt(5)
    assert pooled["seed_spread"] == pytest.approx(math.sqrt(5)) and pooled["gap_over_spread"] == pytest.approx(
        2 / math.sqrt(5))
    assert pooled["mean_a"] == 2.0 and pooled["mean_b"] == 4.0 and pooled["level"] == 0.95


def _run(backend, devices, seed, loss, accuracy):
    return {"backend": backend, "devices": devices, "seed": seed, "losses": [9.0, loss], "accuracy": accuracy}


def test_seed_statistics_pairs_framework_and_order_on_the_same_seeds():
    runs = [_run(b, n, s, loss=1.0 + s + (0.25 if b == "y" else 0.0) + 0.5 * (n == 2), accuracy=None)
            for s in (0, 1, 2) for b in ("x", "y") for n in (1, 2)]
    entries = seed_statistics(runs)
    assert {e["metric"] for e in entries} == {"final_loss"}  # no accuracy where the runs have none
    found = {(e["kind"], e["a"]["backend"], e["a"]["devices"], e["b"]["backend"], e["b"]["devices"]): e
             for e in entries}
    assert set(found) == {("framework", "x", 1, "y", 1), ("framework", "x", 2, "y", 2),
                          ("order", "x", 1, "x", 2), ("order", "y", 1, "y", 2)}  # never both at once
    framework = found[("framework", "x", 1, "y", 1)]
    assert framework["seeds"] == 3 and framework["mean_difference"] == pytest.approx(-0.25)
    assert framework["seed_spread"] == pytest.approx(1.0)  # seeds 0, 1, 2 shift both sides by 1
    assert found[("order", "y", 1, "y", 2)]["mean_difference"] == pytest.approx(-0.5)


# ---------------------------------------------------------------------------------------------------------------------
# Where pairs of runs part

@pytest.mark.parametrize("differences, p", [
    ([1] * 8, 0.0078125), ([1] * 7 + [-1], 0.0703125), ([1, 1, 1, 0, 0] + [-1] * 7, 0.34375),
    ([1, 0, -1], 1.0), ([0, 0], 1.0),
])
def test_the_sign_test_is_scipys_exact_binomial_test(differences, p):
    """scipy.stats.binomtest(positive, positive + negative, 0.5).pvalue, ties left out."""
    assert sign_test(differences)["p"] == pytest.approx(p, rel=1e-12)


def _parted(seed, kind, parts):
    return {"kind": kind, "seed": seed, "split_step": 7 if parts else None}


def test_the_researchers_8_of_10_against_4_of_10_is_tested_paired_by_seed():
    """A framework pair parted on 8 of 10 seeds, its order pair on 4 of them (all among the 8): on 4 seeds the
    framework parts and the order does not, never the other way; 4 one-sided seeds give p = 2 / 2**4 = 0.125, which
    10 seeds cannot make smaller (no fewer pairs of either kind part on the others)."""
    pairs = [_parted(s, "framework", s < 8) for s in range(10)] + [_parted(s, "order", s < 4) for s in range(10)]
    pairs.append({"kind": "both", "seed": 0, "split_step": None})  # counted in neither kind
    test = parted_test(pairs)
    assert (test["seeds"], test["positive"], test["negative"]) == (10, 4, 0)
    assert test["framework"] == 0.8 and test["order"] == 0.4 and test["p"] == 0.125
    assert "exact sign test p = 0.125" in parted_words(test)
    assert parted_test([_parted(0, "framework", True)]) is None and parted_words(None) == ""


def test_relative_divergence_is_per_parameter_over_the_models_scale():
    """Each parameter's difference over the largest |parameter| of either run: a parameter of rounding noise (1e-6,
    opposite signs: an attention key's bias, which gets no gradient) is not a divergence of 2."""
    a = {"w": np.array([2.0, -4.0]), "b": np.zeros(3), "s": np.float32(1.0), "noise": np.array([1e-6])}
    b = {"w": np.array([2.0, -4.004]), "b": np.zeros(3), "s": np.float32(1.5), "noise": np.array([-1e-6])}
    assert relative_divergence(a, b) == pytest.approx({"w": 0.004 / 4.004, "b": 0.0, "s": 0.5 / 4.004,
                                                       "noise": 2e-6 / 4.004})
    assert relative_divergence({"b": np.zeros(2)}, {"b": np.zeros(2)}) == {"b": 0.0}


def test_first_step_past_counts_from_one_and_needs_more_than_the_bound():
    assert first_step_past([1e-6, 1e-4, 2e-4, 1e-6], 1e-4) == 3
    assert first_step_past([1e-6] * 5, 1e-4) is None and first_step_past([], 1.0) is None


def _trajectory(steps: int, split: dict[str, int]) -> list[dict[str, float]]:
    """Per step, a pair's relative divergence per parameter: rounding-level (growing from 1e-7) until the
    parameter's step in ``split``, then far past any bound."""
    return [{name: (1e-2 if at is not None and step >= at else 1e-7 * (1 + step / steps)) for name, at in split.items()}
            for step in range(1, steps + 1)]


def test_the_split_step_is_found_where_a_known_trajectory_parts():
    record = pair_record(("tf", 1), ("ae", 1), _trajectory(20, {"w0": 12, "b0": 15, "w1": 12, "b1": None}))
    assert record["kind"] == "framework" and record["split_step"] == 12
    assert record["param_split_steps"] == {"w0": 12, "b0": 15, "w1": 12, "b1": None}
    assert sorted(record["first_parted"]) == ["w0", "w1"]
    assert len(record["max_rel_param_diff"]) == 20 and record["rel_param_diff"]["b0"] == 1e-2
    together = pair_record(("tf", 1), ("tf", 2), _trajectory(20, {"w0": None}))
    assert together["kind"] == "order" and together["split_step"] is None and together["first_parted"] == []
    assert pair_record(("tf", 1), ("ae", 2), _trajectory(3, {"w0": 3}), bound=0.1)["split_step"] is None
    assert pair_kind(("tf", 1), ("ae", 2)) == "both"


def test_summaries_put_the_framework_pairs_beside_the_order_pairs_over_seeds():
    pairs = []
    for seed, (framework_at, order_at) in enumerate([(5, 7), (None, 4), (9, None)]):
        framework = {"w": framework_at, "b": 3 if seed == 2 else None}  # b parts first on seed 2
        pairs.append({**pair_record(("tf", 1), ("ae", 1), _trajectory(10, framework)), "seed": seed})
        pairs.append({**pair_record(("tf", 1), ("tf", 2), _trajectory(10, {"w": order_at})), "seed": seed})
    by_pair = {p["kind"]: p for p in summarize_pairs(pairs)}
    assert by_pair["framework"]["seeds"] == 3 and by_pair["framework"]["parted"] == 2
    assert by_pair["framework"]["first_parted"] == ["w", "b"] and by_pair["order"]["first_parted"] == ["w"]
    assert first_in(by_pair["framework"]) == "w (+1 other)" and first_in({"first_parted": []}) == "-"
    assert by_pair["framework"]["split_steps"] == [5, None, 3] and by_pair["order"]["split_steps"] == [7, 4, None]
    assert by_pair["framework"]["final_max"] == 1e-2 and by_pair["framework"]["final_median"] == 1e-2
    kinds = {k["kind"]: k for k in summarize_kinds(pairs)}
    assert set(kinds) == {"framework", "order"}
    assert kinds["order"]["pairs"] == 3 and kinds["order"]["parted"] == 2 and kinds["order"]["split_steps"] == [4, 7]


# ---------------------------------------------------------------------------------------------------------------------
# Seeds

@pytest.mark.parametrize("text, seeds", [("0-9", list(range(10))), ("0,3,7-9", [0, 3, 7, 8, 9]), ("5", [5]),
                                         (" 2 , 4-4", [2, 4])])
def test_seeds_are_lists_and_ranges(text, seeds):
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text, words", [("", "expected seeds like"), ("a", "expected seeds like"),
                                         ("-1", "expected seeds like"), ("1-", "expected seeds like"),
                                         ("3-1", "runs backwards"), ("1,0-2", "given more than once")])
def test_bad_seed_lists_say_what_was_expected(text, words):
    with pytest.raises(ValueError, match=words):
        parse_seeds(text)


def test_fixed_seeds_hold_for_every_seed_and_the_rest_follow_it():
    assert run_seeds([0, 1], init=7) == [RunSeeds(7, 0, 0), RunSeeds(7, 1, 1)]
    assert run_seeds([3], data=1, noise=2) == [RunSeeds(3, 1, 2)]
    with pytest.raises(ValueError, match="a noise seed must be >= 0"):
        run_seeds([0], noise=-1)


class _Recorder:
    """What seed_trainer may call on a trainer: it records the values."""

    def __init__(self):
        self.params = self.state = None

    def set_params(self, params):
        self.params = params

    def set_state(self, state):
        self.state = state


def test_a_separate_init_seed_starts_from_that_seeds_draw():
    model = Model(lambda rng: {"w": rng.normal(size=3), "moving": State(rng.normal(size=2))},
                  lambda ops, params, x: x, lambda ops, outputs, y: outputs)
    trainer = _Recorder()
    seed_trainer(trainer, model, RunSeeds(init=4, data=0, noise=0))
    drawn = np.random.default_rng(4)
    assert np.array_equal(trainer.params["w"], drawn.normal(size=3))
    assert np.array_equal(trainer.state["moving"], drawn.normal(size=2))
    same = _Recorder()
    seed_trainer(same, model, RunSeeds(init=2, data=0, noise=2))  # the trainer drew them itself
    assert same.params is None and same.state is None


# ---------------------------------------------------------------------------------------------------------------------
# The command

def test_compare_over_seeds_reports_statistics_and_pairs(tmp_path, capsys, backend_name):
    """Two seeds with the initial parameters and the noise fixed (the data seed follows the seed), on two device
    counts: the runs of each seed, their order pair, the statistics over seeds and the files."""
    out = tmp_path / "seeds"
    argv = ["compare", "--backends", backend_name, "--devices", "1,2", "--seeds", "0,1", "--init-seed", "7",
            "--noise-seed", "7", "--steps", "3", "--batch", "16", "--out", str(out), "--tensorboard",
            str(tmp_path / "tb")]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "the gap against the seed spread: paired over 2 seeds" in printed and "where runs part" in printed
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["seeds"] == [0, 1] and results["config"]["seed"] == 0
    assert results["config"]["init_seed"] == 7 and results["config"]["data_seed"] is None
    assert [(r["seed"], r["seeds"], r["devices"]) for r in results["runs"]] == [
        (s, {"init": 7, "data": s, "noise": 7}, n) for s in (0, 1) for n in (1, 2)]
    losses = {(r["seed"], r["devices"]): r["losses"] for r in results["runs"]}
    assert losses[(0, 1)] != losses[(1, 1)]  # the data seed follows the seed
    assert [(p["seed"], p["kind"]) for p in results["pairs"]] == [(0, "order"), (1, "order")]
    for pair in results["pairs"]:
        assert len(pair["max_rel_param_diff"]) == 3 and pair["split_step"] is None  # rounding only, 3 steps
    assert all("rel_param_curves" not in pair for pair in results["pairs"])  # parity's, in memory only
    (summary,) = results["pair_summary"]
    assert summary["seeds"] == 2 and summary["parted"] == 0
    assert results["parted_test"] is None  # one backend: no framework pairs to test against the order pairs
    stats = {e["metric"]: e for e in results["statistics"]}
    assert set(stats) == {"final_loss", "accuracy"}
    assert all(e["kind"] == "order" and e["seeds"] == 2 and e["low"] <= e["mean_difference"] <= e["high"]
               for e in stats.values())
    assert [w["seed"] for w in results["within"]] == [0, 1]
    for name in ("params.npz", "params-seed-1.npz"):
        with np.load(out / name) as saved:
            assert sorted(key.rsplit("/", 1)[0] for key in saved.files if key.endswith("/w0")) == [
                f"{backend_name}/1", f"{backend_name}/2"]
    for name in ("pairs.png", "seeds.png"):
        assert (out / name).read_bytes()[:8] == PNG_MAGIC
    # The tidy tables (one row per run, per run and step, per pair and step), TensorBoard runs and the HTML report.
    tables = {name: list(csv.DictReader((out / f"{name}.csv").open())) for name in ("runs", "steps", "pairs")}
    assert [(r["seed"], r["devices"], r["final_loss"]) for r in tables["runs"]] == [
        (str(r["seed"]), str(r["devices"]), repr(r["losses"][-1])) for r in results["runs"]]
    assert len(tables["steps"]) == 4 * 3 and len(tables["pairs"]) == 2 * 3
    assert sorted(p.name for p in (tmp_path / "tb").iterdir()) == [
        f"{backend_name}-x{n}-seed{s}" for n in (1, 2) for s in (0, 1)]
    assert main(["report", str(out), "--out", str(tmp_path / "report.html")]) == 0
    page = (tmp_path / "report.html").read_text()
    assert "The gap against the seed spread" in page and "Where runs part" in page
    assert page.count("data:image/png") == len(list(out.glob("*.png")))  # every plot embedded


def test_seed_and_seeds_together_are_refused(tmp_path, capsys):
    assert main(["compare", "--seed", "0", "--seeds", "0-3", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--seed 0 and --seeds: give one" in err and len(err.strip().splitlines()) == 1
