"""The multigpu command: devices, compare (table, results.json, plots), parity (exit 1 on disagreement), errors."""

from __future__ import annotations

import argparse
import importlib
import json

import numpy as np
import pytest

from tests.conftest import INSTALLED, THEANO, needs_all_backends
from toolkit.backend import registry
from toolkit.command.compare import SCHEMA, SCHEMA_VERSION
from toolkit.command.main import main
from toolkit.errors import ArgumentError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_devices_lists_what_each_backend_sees(capsys):
    assert main(["devices", "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert set(table) == INSTALLED
    for rows in table.values():
        assert [row["device"] for row in rows if row["kind"] == "cpu"] == ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
        assert all(row["native"] for row in rows)


def test_determinism_runs_the_command_twice_in_fresh_processes_and_finds_them_identical(backend_name, tmp_path,
                                                                                         capsys, monkeypatch):
    """`multigpu determinism` runs `python -m toolkit compare` twice (fresh processes: this also shows that
    ``python -m toolkit`` runs the command) and compares every loss and final parameter exactly."""
    monkeypatch.delenv("XLA_FLAGS", raising=False)  # the children make their own logical devices
    argv = ["determinism", "--backends", backend_name, "--devices", "2", "--dtype", "float32", "--steps", "2",
            "--batch", "16", "--out", str(tmp_path)]
    assert main(argv) == 0
    assert capsys.readouterr().out == (f"{backend_name} x2: bit-identical in two fresh processes (2 losses and every "
                                       "final parameter)\n")
    assert (tmp_path / "first" / "params.npz").is_file() and (tmp_path / "second" / "params.npz").is_file()


def test_determinism_names_the_first_step_and_the_parameters_that_differ(tmp_path, capsys):
    from toolkit.command.determinism import differences, print_differences

    for name, loss, bias in (("first", 0.5, 1.0), ("second", 0.5000001, 1.0 + 2 ** -20)):
        folder = tmp_path / name
        folder.mkdir()
        run = {"backend": "tensorflow", "devices": 2, "seed": 0, "losses": [0.7, 0.6, loss, 0.4]}
        (folder / "results.json").write_text(json.dumps({"runs": [run]}))
        np.savez(folder / "params.npz", **{"tensorflow/2/w": np.ones((2, 2), np.float32),
                                           "tensorflow/2/b": np.full(2, bias, np.float32)})
    (record,) = differences(tmp_path / "first" / "results.json", tmp_path / "second" / "results.json")
    assert (record["identical"], record["first_loss_step"], record["params"]) == (False, 3, ["b"])
    assert record["losses"] == [0.5, 0.5000001] and record["max_param_diff"] == 2 ** -20
    print_differences([record])
    assert capsys.readouterr().out == ("tensorflow x2: DIFFERS: losses first differ at step 3 (0.5 vs 0.5000001); "
                                       "final parameters b differ (max |difference| 9.54e-07)\n")
    # Two runs that diverged alike are the same run: NaN losses are equal bit for bit as JSON writes them.
    for name in ("first", "second"):
        run = {"backend": "tensorflow", "devices": 2, "seed": 0, "losses": [0.7, float("nan")]}
        (tmp_path / name / "results.json").write_text(json.dumps({"runs": [run]}))
        np.savez(tmp_path / name / "params.npz", **{"tensorflow/2/w": np.array([np.nan, 1.0], np.float32)})
    (record,) = differences(tmp_path / "first" / "results.json", tmp_path / "second" / "results.json")
    assert record["identical"], record
    (tmp_path / "second" / "results.json").write_text(json.dumps({"runs": []}))
    with pytest.raises(ArgumentError, match="hold different runs"):
        differences(tmp_path / "first" / "results.json", tmp_path / "second" / "results.json")


@needs_all_backends
def test_compare_writes_table_json_and_plots(tmp_path, capsys):
    out = tmp_path / "results"
    assert main(["compare", "--devices", "1,2", "--steps", "3", "--batch", "32", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "median step" in printed and "results.json" in printed
    results = json.loads((out / "results.json").read_text())
    assert results["schema"] == SCHEMA and results["version"] == SCHEMA_VERSION
    assert results["config"]["backends"] == ["tensorflow", THEANO] and results["config"]["devices"] == [1, 2]
    runs = {(r["backend"], r["devices"]): r for r in results["runs"]}
    assert set(runs) == {(b, n) for b in ("tensorflow", THEANO) for n in (1, 2)}
    for run in runs.values():
        assert len(run["losses"]) == len(run["step_times_ms"]) == 3
        assert run["first_step_ms"] == run["step_times_ms"][0] and run["p10_ms"] <= run["median_ms"] <= run["p90_ms"]
        assert run["peak_rss_mb"] > 0 and 0.0 <= run["accuracy"] <= 1.0
        assert "params" not in run
    for entry in results["divergence"]:
        assert len(entry["max_abs_param_diff"]) == 3 and max(entry["max_abs_param_diff"]) < 1e-5
    # every pair of the 4 runs, by what differs; none parts in 3 steps
    assert sorted(p["kind"] for p in results["pairs"]) == ["both", "both", "framework", "framework", "order", "order"]
    assert [k["kind"] for k in results["kind_summary"]] == ["framework", "order", "both"]
    assert all(p["split_step"] is None for p in results["pairs"]) and "where runs part" in printed
    assert results["parted_test"] == {"seeds": 1, "positive": 0, "negative": 0, "p": 1.0, "framework": 0.0,
                                      "order": 0.0}
    assert "exact sign test p = 1" in printed
    for name in ("loss.png", "divergence.png", "step_time.png", "pairs.png"):
        assert (out / name).read_bytes()[:8] == PNG_MAGIC


def test_compare_json_and_quiet_on_one_backend(tmp_path, capsys, backend_name):
    argv = ["compare", "--backends", backend_name, "--model", "polynomial", "--devices", "2", "--steps", "2"]
    assert main([*argv, "--json", "--out", str(tmp_path)]) == 0
    results = json.loads(capsys.readouterr().out)
    assert results["divergence"] == [] and results["runs"][0]["accuracy"] is None
    assert (tmp_path / "step_time.png").exists() and not (tmp_path / "divergence.png").exists()
    assert main([*argv, "--quiet", "--out", str(tmp_path / "quiet")]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    quiet = tmp_path / "quiet"
    assert printed == [f"wrote {quiet / 'results.json'} and {quiet / 'params.npz'} and {quiet / 'runs.csv'} and "
                       f"{quiet / 'steps.csv'} and {quiet / 'loss.png'} and {quiet / 'step_time.png'}"]


@pytest.mark.parametrize("model", ["mnist-convnet", "resnet", "transformer", "lstm-text"])
def test_compare_trains_the_built_in_real_models(tmp_path, backend_name, model):
    """The command's path for the real models (their own data, tokens kept as ids, state and dropout): one step
    on two devices, its loss finite, its first step (compile time) reported."""
    argv = ["compare", "--backends", backend_name, "--model", model, "--devices", "2", "--steps", "1", "--batch", "8",
            "--quiet", "--out", str(tmp_path)]
    assert main(argv) == 0
    (run,) = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert run["backend"] == backend_name and run["devices"] == 2
    assert len(run["losses"]) == 1 and np.isfinite(run["losses"][0]) and run["first_step_ms"] > 0


def _relu_perturbed_backend(monkeypatch, scale: float) -> None:
    """Register "perturbed": this environment's Theano-family backend with one op, ReLU, scaled by ``scale``."""
    module = importlib.import_module(f"toolkit.backends.{THEANO}.backend")

    base = importlib.import_module(f"toolkit.backends.{THEANO}.ops").TheanoOps

    class PerturbedOps(base):
        def relu(self, x):
            return base.relu.__wrapped__(self, x) * scale  # the primitive on natives, behind the ops' boundary

    class Perturbed(module.Backend):
        name = "perturbed"

        def ops(self, dtype):
            if dtype not in self._ops:
                self._ops[dtype] = PerturbedOps(dtype, self.linker)
            return self._ops[dtype]

    spec = registry.BackendSpec("perturbed", f"toolkit.backends.{THEANO}", (THEANO, "jax"), (THEANO, "jax"), THEANO)
    monkeypatch.setitem(registry.REGISTRY, "perturbed", spec)
    monkeypatch.setitem(registry._loaded, ("perturbed", ()), Perturbed())


#: The float32 parity check's own test: 300 Adam steps (Keras' eps, 1e-7), where a fixed bound would have to be
#: huge (the bound derived for Adam grows with the steps and 1/eps: 49 here, 40 times the parameters' scale).
FLOAT32_PARITY_RUN = ["--dtype", "float32", "--optimizer", "adam", "--steps", "300", "--batch", "64",
                      "--devices", "1,2", "--quiet"]


@needs_all_backends
@pytest.mark.parametrize("scale", [1.0, 1 + 1e-4], ids=["real", "relu-perturbed"])
def test_float32_parity_fails_on_one_op_perturbed_by_1e4_and_passes_the_real_backends(monkeypatch, capsys, scale):
    """The check cannot pass a real difference: ReLU off by 1e-4 relative on one backend fails (the backends part
    hundreds of times further than each parts from itself on another device count, from step 1); the real backends,
    which part only as far as rounding takes them, pass."""
    _relu_perturbed_backend(monkeypatch, scale)
    code = main(["parity", "--backends", "tensorflow,perturbed", *FLOAT32_PARITY_RUN])
    printed = capsys.readouterr().out
    if scale == 1.0:
        assert code == 0, printed
    else:
        assert code == 1 and "first step beyond tolerance: 1 " in printed, printed


@needs_all_backends
def test_float32_parity_fails_on_one_backends_defect_on_one_device_count(capsys):
    """The researcher's case (docs/guides/compare.md, "Parity"): logits 0.1% larger on Aesara or PyTensor only when
    the batch is split in two. The bound comes from the other backend's own divergence, which the defect cannot
    raise, so the 2-device runs fail at step 1 and the 1-device runs pass."""
    code = main(["parity", "--backends", f"tensorflow,{THEANO}", "--dtype", "float32", "--steps", "4", "--batch",
                 "64", "--perturb", f"{THEANO}:1e-3:2", "--json"])
    printed = capsys.readouterr().out
    lines = [line for line in printed.splitlines() if line.startswith("tensorflow vs")]
    verdicts = json.loads(printed.splitlines()[-1])
    assert verdicts["ok"] is False and [verdicts["verdicts"][n]["passed"] for n in ("1", "2")] == [True, False]
    rounding = verdicts["first_step_rounding"]  # each backend's float32 first step against float64
    assert set(rounding) == {"tensorflow", THEANO} and all(0 < max(e.values()) < 1e-4 for e in rounding.values())
    assert code == 1 and lines[0].endswith("every step judged: ok") and lines[1].endswith(": FAILED"), printed
    assert all("(each backend against itself on other device counts, the smaller: " in line for line in lines)
    assert "first step beyond tolerance: 1 in " in printed  # then the diff: every parameter's largest difference
    assert "w0: max |difference|" in printed and "after the last step: tensorflow " in printed


@needs_all_backends
def test_parity_judges_every_steps_loss_where_the_parameters_move_alike(capsys):
    """The polynomial's three coefficients under Adam: outputs 0.1% larger on one backend barely move them (Adam's
    steps are about lr * sign(g)), but every step's loss shows it from step 1."""
    code = main(["parity", "--backends", f"tensorflow,{THEANO}", "--model", "polynomial", "--dtype", "float32",
                 "--steps", "3", "--perturb", f"{THEANO}:1e-3"])
    printed = capsys.readouterr().out
    assert code == 1 and "loss at step 1 beyond tolerance" in printed, printed
    assert "first step beyond tolerance" not in printed  # the parameters alone pass


def test_float32_parity_needs_two_device_counts(capsys):
    # Refused before anything starts: it holds whatever is installed.
    assert main(["parity", "--backends", "tensorflow,aesara", "--dtype", "float32", "--devices", "2", "--steps",
                 "1"]) == 2
    assert "run at least two device counts" in capsys.readouterr().err


def _reference_elsewhere(backend_name, tmp_path, perturb=0.0):
    """A `multigpu compare --out` folder of ``backend_name``'s run, relabelled as another environment's backend
    ("elsewhere"), with ``perturb`` added to one parameter of each run and to its loss at step 2."""
    out = tmp_path / "reference"
    assert main(["compare", "--backends", backend_name, "--devices", "1,2", "--dtype", "float64", "--steps", "3",
                 "--batch", "32", "--out", str(out), "--quiet"]) == 0
    results = json.loads((out / "results.json").read_text())
    for run in results["runs"]:
        run["backend"] = "elsewhere"
        run["losses"][1] += perturb
    for pair in results["pairs"]:
        for run in pair["runs"]:
            run["backend"] = "elsewhere"
    (out / "results.json").write_text(json.dumps(results))
    with np.load(out / "params.npz") as saved:
        params = {key.replace(f"{backend_name}/", "elsewhere/", 1): saved[key] for key in saved.files}
    name = sorted(params)[0].rsplit("/", 1)[1]
    for key in params:
        if key.endswith(f"/{name}"):
            params[key] = params[key] + perturb  # the same parameter in every run
    np.savez(out / "params.npz", **params)
    return out / "results.json"


@pytest.mark.parametrize("perturb", [0.0, 1e-6], ids=["same", "perturbed"])
def test_parity_against_another_environments_run(backend_name, perturb, tmp_path, capsys):
    """`parity --against` trains this environment's backend as the file's run was trained (its config: model,
    devices, dtype, steps, batch, seed) and compares every step's loss and the final parameters run by run."""
    reference = _reference_elsewhere(backend_name, tmp_path, perturb)
    capsys.readouterr()
    code = main(["parity", "--backends", backend_name, "--against", str(reference), "--steps", "1"])
    printed = capsys.readouterr().out
    lines = [line for line in printed.splitlines() if line.startswith("elsewhere")]
    assert [f"on {n} device(s), float64, 3 adam steps" in line for n, line in zip((1, 2), lines)] == [True, True]
    if perturb:
        assert code == 1 and all(line.endswith("FAILED") for line in lines)
        assert printed.count("loss at step 2 beyond tolerance") == 2, printed
        assert printed.count(" beyond tolerance: relative difference") == 4, printed  # a parameter, a loss
    else:
        assert code == 0 and all(line.endswith(": ok") for line in lines)


@pytest.mark.parametrize("content, words", [
    (None, "cannot read it"),
    ("{not json", "not JSON"),
    ('{"schema": "other"}', "expected a `multigpu compare --out` results.json"),
])
def test_parity_against_a_bad_reference_is_one_line_and_exit_2(content, words, tmp_path, capsys):
    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content)
    assert main(["parity", "--against", str(path)]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, words", [
    (["compare", "--model", "vgg16"], "unknown model 'vgg16'"),
    (["compare", "--model", "no_such_module:make"], "cannot load model 'no_such_module:make'"),
    (["compare", "--model", "json:dumps"], "cannot load model"),
    (["compare", "--backends", "torch"], "unknown backend(s) ['torch']"),
    (["compare", "--devices", "5"], "use_logical_devices(5) came too late"),  # this process already has 4
    (["compare", "--steps", "0"], "--steps and --batch must be >= 1"),
    (["compare", "--batch", "100000", "--steps", "1", "--devices", "1"], "larger than the 1438 training examples"),
    (["parity", "--backends", "tensorflow"], "parity compares two backends"),
])
def test_bad_requests_are_one_line_and_exit_2(argv, words, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path)] if argv[0] == "compare" else argv) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("argv, words", [
    (["compare", "--devices", "1,x"], "multigpu compare: error: argument --devices: expected distinct device counts"),
    (["compare", "--devices", "2048"], "from 1 to 64"),
    (["compare", "--seeds", "3-1"], "argument --seeds: the range '3-1' in '3-1' runs backwards"),
    (["compare", "--seeds", "0,x"], "expected seeds like 0-9 or 0,3,7-9"),
    (["bench", "--dtype", "float16"], "multigpu bench: error: argument --dtype: invalid choice: 'float16'"),
    (["compare", "--no-such-option"], "unrecognized arguments: --no-such-option"),
    ([], "multigpu: error: the following arguments are required: command"),
])
def test_bad_arguments_are_one_line_and_exit_2(argv, words, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1 and "usage:" not in err


@pytest.mark.parametrize("command", ["compare", "bench"])
def test_an_unusable_out_folder_is_refused_before_anything_runs(command, tmp_path, capsys, monkeypatch):
    import toolkit.command.main as cli

    monkeypatch.setattr(cli, "_run", lambda *a: pytest.fail("trained despite a bad --out"))
    monkeypatch.setattr("toolkit.command.bench.run_bench", lambda *a, **k: pytest.fail("measured despite a bad --out"))
    existing = tmp_path / "results.json"
    existing.write_text("{}")
    for out, words in ((existing, "is a file; expected a folder"), ("/dev/null/x", "cannot make the folder")):
        assert main([command, "--out", str(out), "--devices", "1"]) == 2
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert existing.read_text() == "{}"


@pytest.mark.parametrize("command", ["devices", "compare", "parity", "bench", "launch"])
def test_help_describes_every_option(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    import toolkit.command.main as cli

    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    undocumented = [a.option_strings for a in sub._actions if a.option_strings and not a.help]
    assert undocumented == []
    assert capsys.readouterr().out.startswith(f"usage: multigpu {command}")


def test_plots_label_integer_steps_and_every_decade(tmp_path, monkeypatch):
    from toolkit.command import plots

    steps = 12
    results = {  # a made-up comparison: no training needed to check the axes
        "config": {"model": "m", "dtype": "float64", "optimizer": "sgd", "backends": ["a", "b"]},
        "runs": [{"backend": b, "devices": n, "losses": list(np.linspace(2, 1, steps)), "median_ms": 1.0,
                  "p10_ms": 0.9, "p90_ms": 1.1} for b in ("a", "b") for n in (1, 2)],
        "divergence": [{"devices": n, "backends": ["a", "b"], "max_abs_param_diff": list(np.logspace(-16, -6, steps))}
                       for n in (1, 2)],
    }
    figures = {}
    monkeypatch.setattr(plots, "_save", lambda figure, path: figures.setdefault(path.name, figure) and path)
    plots.write_plots(results, tmp_path)
    for name in ("loss.png", "divergence.png"):
        axis = figures[name].axes[0]
        figures[name].canvas.draw()
        low, high = axis.get_xlim()
        shown = [t for t in axis.get_xticks() if low <= t <= high]
        assert shown and all(float(t).is_integer() for t in shown), (name, shown)
    axis = figures["divergence.png"].axes[0]
    low, high = axis.get_ylim()
    decades = [t for t in axis.get_yticks() if low <= t <= high]
    assert len(decades) >= 10, decades  # 1e-16 .. 1e-6: every power of ten gets a label
