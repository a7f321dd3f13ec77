"""Sweeps in one ``multigpu compare`` (issue 33 item 5): list-valued --batch, --dtype, --lr and --eps, every
combination its own comparison, one table and sweep.csv."""

from __future__ import annotations

import csv
import json

import pytest

from toolkit.command import sweep
from toolkit.command.compare import make_optimizer
from toolkit.command.main import main
from toolkit.command.sweep import combinations, label, parse_list, sweep_rows
from toolkit.errors import ArgumentError


def test_lists_and_combinations():
    assert parse_list("0.01, 0.001", float) == [0.01, 0.001] and parse_list("32", int) == [32]
    for text, words in (("1,1", "distinct"), ("", "distinct"), ("1,x", "could not convert")):
        with pytest.raises(ArgumentError, match=words):
            parse_list(text, float)
    combos = combinations({"batch": [32, 64], "dtype": ["float32"], "lr": [0.1], "eps": [None, 1e-3]})
    assert combos == [{"batch": 32, "dtype": "float32", "lr": 0.1, "eps": None},
                      {"batch": 32, "dtype": "float32", "lr": 0.1, "eps": 1e-3},
                      {"batch": 64, "dtype": "float32", "lr": 0.1, "eps": None},
                      {"batch": 64, "dtype": "float32", "lr": 0.1, "eps": 1e-3}]
    assert [label(c) for c in combos[:2]] == ["batch32-float32-lr0.1", "batch32-float32-lr0.1-eps0.001"]
    assert make_optimizer("adam", 0.1, 1e-3).eps == 1e-3 and make_optimizer("rmsprop", 0.1).eps == 1e-7
    with pytest.raises(ArgumentError, match="--optimizer sgd, which has no eps"):
        make_optimizer("sgd", 0.1, 1e-3)


def _run(backend, devices, seed, losses, accuracy, first, median):
    return {"backend": backend, "devices": devices, "seed": seed, "losses": losses, "accuracy": accuracy,
            "first_step_ms": first, "median_ms": median}


def test_sweep_rows_are_tidy_one_per_backend_and_device_count_with_step_times():
    results = {"config": {"backends": ["a", "b"], "devices": [1, 2]},
               "runs": [_run("a", 1, 0, [2.0, 1.0], 0.5, 900.0, 2.0), _run("a", 1, 1, [2.0, 3.0], 0.7, 500.0, 4.0),
                        _run("a", 2, 0, [2.0, 1.2], 0.5, 40.0, 3.0), _run("b", 1, 0, [2.0, 1.5], None, 30.0, 1.0),
                        _run("b", 2, 0, [2.0, 1.6], None, 20.0, 1.5)],
               "kind_summary": [{"kind": "order", "parted": 1, "pairs": 4, "final_median": 2e-5}]}
    timing = {"runs": [{"backend": "a", "devices": 1, "first_step_s": 0.25, "median_ms": 1.75, "peak_rss_mb": 512.0},
                       {"backend": "b", "devices": 2, "error": "timed out after 600 s"}]}
    combination = {"batch": 8, "dtype": "float32", "lr": 0.1, "eps": None}
    rows = sweep_rows(combination, results, timing)
    assert [(r["backend"], r["devices"]) for r in rows] == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]
    first = rows[0]
    assert first == {"folder": "batch8-float32-lr0.1", "batch": 8, "dtype": "float32", "lr": 0.1, "eps": None,
                     "backend": "a", "devices": 1, "perturb": None, "final loss": 2.0, "accuracy": 0.6,
                     "first step (ms)": 700.0, "median step (ms)": 3.0, "fresh first step (ms)": 250.0,
                     "fresh median step (ms)": 1.75, "fresh peak RSS (MB)": 512.0, "fresh error": None,
                     "framework pairs parted": None, "framework divergence": None, "order pairs parted": "1/4",
                     "order divergence": 2e-5}
    assert rows[2]["accuracy"] is None and rows[3]["fresh error"] == "timed out after 600 s"
    assert rows[1]["fresh first step (ms)"] is None  # a run the timing did not reach
    assert "fresh first step (ms)" not in sweep_rows(combination, results)[0]  # without --fresh-timing


def test_an_eps_for_sgd_is_refused_before_anything_trains(tmp_path, capsys):
    assert main(["compare", "--optimizer", "sgd", "--eps", "1e-3", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--eps 0.001 given for --optimizer sgd" in err and len(err.strip().splitlines()) == 1
    assert main(["compare", "--fresh-timing", "--out", str(tmp_path)]) == 2
    assert "--fresh-timing times the combinations of a sweep" in capsys.readouterr().err
    assert main(["compare", "--fresh-timing", "--lr", "0.1,0.2", "--timeout", "0", "--out", str(tmp_path)]) == 2
    assert "--timeout must be > 0 seconds, got 0.0" in capsys.readouterr().err
    assert main(["compare", "--lr", "0.1,0.2", "--timeout", "5", "--out", str(tmp_path)]) == 2
    assert "--timeout 5 is for --fresh-timing's processes" in capsys.readouterr().err
    assert main(["compare", "--fresh-timing", "--lr", "0.1,0.2", "--perturb", "x:1e-3", "--out", str(tmp_path)]) == 2
    assert "cannot time a --perturb run" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:  # argparse's own exit, status 2
        main(["compare", "--dtype", "float32,float16", "--out", str(tmp_path)])
    assert stopped.value.code == 2 and "expected float32 or float64, got 'float16'" in capsys.readouterr().err


def test_compare_sweeps_every_combination_into_its_own_folder_and_one_table(tmp_path, capsys, backend_name,
                                                                             monkeypatch):
    """--fresh-timing's processes are multigpu time's (tests/test_timing.py runs them); here each combination's
    config reaches them and their numbers reach the rows and timing.json."""
    timed = []

    def time_fresh(config, timeout):
        timed.append((config["eps"], config["batch"], config["devices"], timeout))
        run = {"backend": backend_name, "devices": 1, "startup_s": 3.0, "first_step_s": 0.5, "median_ms": 2.5,
               "low_ms": 2.0, "high_ms": 3.0, "peak_rss_mb": 400.0}
        return {"config": {**config, "steps": sweep.FRESH_STEPS, "rounds": sweep.FRESH_ROUNDS}, "runs": [run],
                "ratios": []}

    monkeypatch.setattr(sweep, "time_fresh", time_fresh)
    argv = ["compare", "--backends", backend_name, "--model", "polynomial", "--devices", "1", "--steps", "2",
            "--batch", "16", "--eps", "1e-7,0.1", "--lr", "0.05", "--out", str(tmp_path), "--json"]
    assert main([*argv, "--fresh-timing", "--timeout", "60"]) == 0
    assert timed == [(1e-7, 16, [1], 60.0), (0.1, 16, [1], 60.0)]
    rows = json.loads(capsys.readouterr().out.splitlines()[0])
    assert [row["folder"] for row in rows] == ["batch16-float32-lr0.05-eps1e-07", "batch16-float32-lr0.05-eps0.1"]
    for row in rows:
        results = json.loads((tmp_path / row["folder"] / "results.json").read_text())
        assert results["config"]["eps"] == row["eps"] and results["runs"][0]["losses"][-1] == pytest.approx(
            row["final loss"])
        assert (row["backend"], row["devices"]) == (backend_name, 1) and row["fresh error"] is None
        assert json.loads((tmp_path / row["folder"] / "timing.json").read_text())["runs"][0]["median_ms"] == 2.5
        assert (row["fresh first step (ms)"], row["fresh median step (ms)"]) == (500.0, 2.5)
        assert row["median step (ms)"] > 0 and row["first step (ms)"] > 0
    losses = [row["final loss"] for row in rows]
    assert losses[0] != losses[1]  # eps reached the optimizer
    with (tmp_path / "sweep.csv").open() as handle:
        assert [r["eps"] for r in csv.DictReader(handle)] == ["1e-07", "0.1"]
    # The report of the sweep's folder: its table, then each combination's comparison, in the sweep's order.
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "sweep.html")]) == 0
    page = (tmp_path / "sweep.html").read_text()
    assert f"<h2>Sweep {tmp_path}</h2>" in page
    first, second = (f"<h2 id=r{i}>{tmp_path / row['folder']}</h2>" for i, row in enumerate(rows))
    assert page.index(first) < page.index(second)
