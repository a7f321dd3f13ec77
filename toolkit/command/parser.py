"""The ``multigpu`` command's argument parser: its subcommands, their options and the argument types that check
what the user typed before anything runs (:mod:`toolkit.command.main` runs them)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolkit.backend.logical_devices import MAX_LOGICAL_DEVICES
from toolkit.backend.registry import REGISTRY

#: The command's exit statuses: success; a check that failed (parity, determinism); an error in what the user typed
#: (argparse's 2).
EXIT_OK, EXIT_PARITY_FAILED, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line (argparse prints the whole usage first); ``--help`` still shows it."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _device_counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or not 1 <= min(counts) <= max(counts) <= MAX_LOGICAL_DEVICES or len(set(counts)) != len(counts):
        raise argparse.ArgumentTypeError(f"expected distinct device counts from 1 to {MAX_LOGICAL_DEVICES} like "
                                         f"1,2,4; got {text!r}")
    return counts


def _backends(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"expected distinct backend names like tensorflow,aesara; got {text!r}")
    return names


def _seeds(text: str) -> list[int]:
    from toolkit.command.seeds import parse_seeds

    try:
        return parse_seeds(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error


def _dtype(text: str) -> str:
    if text not in ("float32", "float64"):
        raise ValueError(f"expected float32 or float64, got {text!r}")
    return text


def _listed(kind: Callable[[str], Any], sweep: bool) -> Callable[[str], Any]:
    """An argparse type: one value of ``kind``, or with ``sweep`` a comma-separated list of distinct ones."""
    from toolkit.command.sweep import parse_list

    def parse(text: str):
        try:
            return parse_list(text, kind) if sweep else kind(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from error

    parse.__name__ = getattr(kind, "__name__", "value")
    return parse


def _output_options(sub: argparse.ArgumentParser, quiet: str) -> None:
    """A subcommand's ``--quiet`` (what it leaves out: ``quiet``) and ``--json`` (the results on stdout)."""
    sub.add_argument("--quiet", action="store_true", help=quiet)
    sub.add_argument("--json", action="store_true", help="print the results as JSON on stdout")


def build_parser() -> argparse.ArgumentParser:
    """The ``multigpu`` command's argument parser: one subcommand each for devices, compare, parity, determinism,
    localize, time, report, bench, launch.

    Returns:
        The parser; its errors are one line on stderr and exit status :data:`EXIT_USAGE`.
    """
    from toolkit.backend.registry import available_backends
    from toolkit.command.compare import OPTIMIZERS
    from toolkit.command.divergence import SPLIT_BOUND
    from toolkit.command.flops import PEAK_MATMUL_SIZE
    from toolkit.command.localize import LOCALIZE_BOUND
    from toolkit.command.seed_stats import INTERVAL_LEVEL
    from toolkit.command.seeds import DEFAULT_SEED
    from toolkit.command.workloads import BENCH_MODELS, WORKLOADS

    parser = _Parser(prog="multigpu", description="Compare TensorFlow and Aesara on several devices.")
    commands = parser.add_subparsers(dest="command", required=True)

    devices = commands.add_parser("devices", help="the devices each installed backend sees")
    devices.add_argument("--logical", type=int, default=None, help="make this many logical CPU devices first")
    devices.add_argument("--json", action="store_true", help="print the table as JSON")

    def run_options(sub, devices_default: str, steps_default: int, sweep: bool = False) -> None:
        """The options of compare and parity; with ``sweep``, --batch, --dtype, --lr and --eps take lists."""
        listed = " (a comma-separated list sweeps: every combination runs)" if sweep else ""
        sub.add_argument("--model", default="digits-mlp", help=f"{', '.join(WORKLOADS)} or module:function")
        sub.add_argument("--backends", type=_backends, default=available_backends(),
                         help="comma-separated (default: every installed backend)")
        sub.add_argument("--devices", type=_device_counts, default=_device_counts(devices_default),
                         help=f"device counts, comma-separated (default {devices_default})")
        dtype = sub.get_default("dtype") or "float32"
        sub.add_argument("--dtype", type=_listed(_dtype, sweep), default=[dtype] if sweep else dtype,
                         help=f"the computation dtype, float32 or float64 (default {dtype}){listed}")
        sub.add_argument("--optimizer", choices=list(OPTIMIZERS), default="adam",
                         help="the optimizer (default %(default)s)")
        sub.add_argument("--lr", type=_listed(float, sweep), default=[0.01] if sweep else 0.01,
                         help=f"learning rate (default 0.01){listed}")
        sub.add_argument("--eps", type=_listed(float, sweep), default=[None] if sweep else None,
                         help=f"the epsilon of adam, adamw or rmsprop (default Keras', 1e-7){listed}")
        sub.add_argument("--steps", type=int, default=steps_default,
                         help="training steps per backend and device count (default %(default)s)")
        sub.add_argument("--batch", type=_listed(int, sweep), default=[128] if sweep else 128,
                         help=f"global batch size (default 128){listed}")
        sub.add_argument("--seed", type=int, default=None,
                         help=f"seeds the initial parameters, the data (its train/test split and the batches) and the "
                              f"dropout noise (default {DEFAULT_SEED})")
        for part, what in (("init", "the initial parameters"), ("data", "the train/test split and the batches"),
                           ("noise", "the per-example noise (dropout)")):
            sub.add_argument(f"--{part}-seed", type=int, default=None,
                             help=f"seeds {what} alone, the same for every seed of --seeds (default: the seed)")
        sub.add_argument("--perturb", default=None, metavar="BACKEND:SCALE[:DEVICES]",
                         help="check the check: multiply BACKEND's model outputs by 1 + SCALE, on every device "
                              "count or only on DEVICES (comma-separated), e.g. aesara:1e-3:2")
        _output_options(sub, "no progress bar, no table: one line at the end")

    compare = commands.add_parser(
        "compare", help="train one model on every backend and device count, report",
        description="Train one model on every backend and device count in lockstep; report the losses, step times, "
                    "test accuracy and where the runs part. For research comparisons: --seeds 0-9 runs every seed "
                    "and gives, per metric, the gap between backends paired by seed with its "
                    f"{INTERVAL_LEVEL:.0%} t interval against the spread over seeds; every pair of runs is compared "
                    "parameter by parameter after every step, the two backends on one device count beside each "
                    "backend against itself on another (the summation order alone), with the step where each pair "
                    "parts (--split-bound). Writes results.json, params.npz and plots to --out.")
    run_options(compare, "1,2,4", 30, sweep=True)
    compare.add_argument("--seeds", type=_seeds, default=None, metavar="LIST",
                         help="seeds as an axis: every backend and device count runs once per seed, e.g. 0-9 or "
                              "0,3,7-9 (not with --seed); the tables and results.json then give, per metric, the "
                              f"gap between backends paired by seed with its {INTERVAL_LEVEL * 100:.0f}%% t interval, "
                              "against the spread over seeds")
    compare.add_argument("--split-bound", type=float, default=SPLIT_BOUND, metavar="RELATIVE",
                         help="a pair of runs parts at the first step where a parameter's max |a - b|, over "
                              "the largest |parameter|, passes this (default %(default)g)")
    compare.add_argument("--out", type=Path, default=Path("results"),
                         help="folder for results.json, the tidy CSV files (runs.csv, steps.csv, pairs.csv) and the "
                              "plots (default %(default)s)")
    compare.add_argument("--fresh-timing", action="store_true",
                         help="in a sweep, also time each combination's backends and device counts in a fresh process "
                              "of its own (first step and median step, as multigpu time; timing.json in each folder)")
    compare.add_argument("--timeout", type=float, default=None,
                         help="with --fresh-timing, seconds allowed per process (default 600)")
    compare.add_argument("--tensorboard", type=Path, default=None, metavar="DIR",
                         help="also write each run's losses, step times and divergences as TensorBoard event files "
                              "under DIR (one run per backend, device count and seed; no TensorFlow needed)")

    parity = commands.add_parser("parity", help="exit 1 with a diff when the backends disagree beyond tolerance")
    parity.set_defaults(dtype="float64")
    run_options(parity, "1,2", 10)  # two device counts: each backend is also compared with itself
    parity.add_argument("--against", type=Path, default=None, metavar="RESULTS_JSON",
                        help="check each backend of --backends against the runs of a `multigpu compare --out` "
                             "folder's results.json (made in another environment, e.g. Aesara's): the model, devices, "
                             "dtype, optimizer, lr, steps, batch and seeds are the file's (its first seed's runs)")

    determinism = commands.add_parser(
        "determinism", help="run one comparison twice in fresh processes: bit-identical, or the first difference",
        description="Run multigpu compare with these options twice, each in a fresh process, and compare every "
                    "run's losses (every step) and final parameters exactly: exit 0 where all are bit-identical, "
                    "1 with the first step whose loss differs and the parameters that differ otherwise. What "
                    "differs is the framework's own nondeterminism, which no seed controls.")
    run_options(determinism, "1,2", 10)
    determinism.add_argument("--out", type=Path, default=Path("results") / "determinism",
                             help="folder for the two runs (first/ and second/) (default %(default)s)")
    determinism.add_argument("--timeout", type=float, default=600.0,
                             help="seconds allowed per process (default 600)")

    localize = commands.add_parser(
        "localize", help="where the numbers part: every layer output and gradient against a float64 reference",
        description="For one set of parameters and one batch, compute a training step on every backend in --dtype "
                    "and in float64: every output the model names with ops.record(name, x), the model's output, "
                    "the loss and every parameter's gradient, each against the first backend's float64 step. "
                    "Names the first of them past --bound (in the order a step computes them: outputs, loss, "
                    "gradients in backpropagation order) and which backend is farther from the reference. One "
                    "float32 step stays near 1e-6 of float64; training amplifies it: with --steps N --follow every "
                    "backend also trains N steps in --dtype beside float64, and the step and layer where each run "
                    "first parts from float64 are named. Writes localize.json to --out.")
    localize.add_argument("--model", default="digits-mlp", help=f"{', '.join(WORKLOADS)} or module:function")
    localize.add_argument("--backends", type=_backends, default=available_backends(),
                          help="comma-separated; the first one's float64 step is the reference (default: every "
                               "installed backend)")
    localize.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                          help="the computation dtype compared with float64 (default %(default)s)")
    localize.add_argument("--batch", type=int, default=32, help="the batch size (default %(default)s)")
    localize.add_argument("--steps", type=int, default=0,
                          help="float64 training steps on the first backend before the step compared (default "
                               "%(default)s: the initial parameters)")
    localize.add_argument("--follow", action="store_true",
                          help="also train every backend in --dtype alongside those --steps, and say at which step "
                               "and in which layer each run parts from float64 (past --bound)")
    localize.add_argument("--optimizer", choices=list(OPTIMIZERS), default="adam",
                          help="the optimizer of those steps (default %(default)s)")
    localize.add_argument("--lr", type=float, default=0.01, help="their learning rate (default %(default)s)")
    localize.add_argument("--eps", type=float, default=None,
                          help="the epsilon of adam, adamw or rmsprop (default Keras', 1e-7)")
    localize.add_argument("--seed", type=int, default=DEFAULT_SEED,
                          help="seeds the initial parameters, the data and the dropout noise (default %(default)s)")
    localize.add_argument("--bound", type=float, default=LOCALIZE_BOUND, metavar="RELATIVE",
                          help="the relative error past which a quantity has parted (default %(default)g)")
    localize.add_argument("--out", type=Path, default=Path("results"),
                          help="folder for localize.json (default %(default)s)")
    _output_options(localize, "no table: one line at the end")

    timing = commands.add_parser(
        "time", help="time each backend and device count in its own fresh process",
        description="Time every backend and device count in a new process of its own: start-up (interpreter, "
                    "imports, devices) apart from the first step (tracing or compiling), then --rounds rounds of "
                    "--steps steps, the median step with a bootstrap interval over rounds, each process's own peak "
                    "memory, and per device count every backend's ratio to the first with its interval. Any "
                    "optimizer and model (dropout included). Writes timing.json to --out.")
    timing.add_argument("--model", default="digits-mlp", help=f"{', '.join(WORKLOADS)} or module:function")
    timing.add_argument("--backends", type=_backends, default=available_backends(),
                        help="comma-separated; the others' ratios are over the first (default: every installed)")
    timing.add_argument("--devices", type=_device_counts, default=_device_counts("1,2"),
                        help="device counts, comma-separated (default 1,2)")
    timing.add_argument("--dtype", type=_dtype, default="float32", help="the computation dtype (default float32)")
    timing.add_argument("--optimizer", choices=list(OPTIMIZERS), default="adam",
                        help="the optimizer (default %(default)s)")
    timing.add_argument("--lr", type=float, default=0.01, help="learning rate (default %(default)s)")
    timing.add_argument("--eps", type=float, default=None, help="adam's, adamw's or rmsprop's epsilon")
    timing.add_argument("--batch", type=int, default=128, help="global batch size (default %(default)s)")
    timing.add_argument("--steps", type=int, default=20, help="steps per round (default %(default)s)")
    timing.add_argument("--rounds", type=int, default=5, help="rounds per process (default %(default)s)")
    timing.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seeds parameters and batches")
    timing.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per process (default 600)")
    timing.add_argument("--out", type=Path, default=Path("results"), help="folder for timing.json")
    _output_options(timing, "no table: one line at the end")

    report = commands.add_parser(
        "report", help="one self-contained HTML report of result folders",
        description="Build one HTML file from one or many folders written by multigpu compare or localize --out: "
                    "the runs, the gap against the seed spread, where runs part, the plots (embedded) and the "
                    "localization. Open it in any browser; it needs no other file.")
    report.add_argument("folders", type=Path, nargs="+", metavar="DIR", help="result folders")
    report.add_argument("--out", type=Path, default=Path("report.html"),
                        help="the HTML file written (default %(default)s)")
    report.add_argument("--title", default="multigpu comparison report", help="the report's title")

    bench = commands.add_parser("bench", help="step time of the toolkit against native TensorFlow and Aesara code")
    bench.add_argument("--model", type=lambda text: [m for m in text.split(",") if m], default=list(BENCH_MODELS),
                       help=f"models, comma-separated: {', '.join(WORKLOADS)} or module:function (default "
                            f"{','.join(BENCH_MODELS)}: the MLP and the compute-bound ResNet and Transformer)")
    bench.add_argument("--backends", type=_backends, default=available_backends(),
                       help="comma-separated (default: every installed backend)")
    bench.add_argument("--devices", type=_device_counts, default=_device_counts("1,2,4"),
                       help="device counts, comma-separated (default 1,2,4); each is measured in its own process")
    bench.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                       help="the computation dtype (default %(default)s)")
    bench.add_argument("--lr", type=float, default=0.05, help="SGD learning rate (default %(default)s)")
    bench.add_argument("--batch", type=int, default=None,
                       help="global batch size (default: each model's, 256 for the small ones)")
    bench.add_argument("--steps", type=int, default=None,
                       help="steps per round, on as many distinct batches (default: each model's, 32 for the small "
                            "ones, 3 for the compute-bound ones)")
    bench.add_argument("--rounds", type=int, default=7,
                       help="rounds; a step time is the median over them (default %(default)s)")
    bench.add_argument("--seed", type=int, default=0,
                       help="seeds the initial parameters and the batches (default %(default)s)")
    bench.add_argument("--peak-size", type=int, default=PEAK_MATMUL_SIZE,
                       help="side of the square matmul that measures the machine's peak (default %(default)s)")
    bench.add_argument("--no-inputs", dest="inputs", action="store_false",
                       help="leave out the input rows (the toolkit's fit from arrays, a generator and tf.data)")
    bench.add_argument("--timeout", type=float, default=900.0,
                       help="seconds allowed per model and device count (default %(default)s)")
    bench.add_argument("--out", type=Path, default=Path("results"), help="folder for bench.json (default %(default)s)")
    _output_options(bench, "no progress bar, no tables: one line at the end")

    launch = commands.add_parser("launch", help="run a command as N processes of one job on this machine",
                                 usage="multigpu launch -n N [--devices-per-process K] [--backend B] -- command ...")
    launch.add_argument("-n", "--processes", type=int, required=True, help="number of processes")
    launch.add_argument("--devices-per-process", type=int, default=None, help="logical CPU devices per process")
    launch.add_argument("--backend", choices=list(REGISTRY), default=None,
                        help="also set this framework's own variables (TF_CONFIG; JAX_*) and MULTIGPU_BACKEND")
    launch.add_argument("--timeout", type=float, default=60.0,
                        help="seconds a process waits for the others before it stops with PeerLostError")
    launch.add_argument("argv", nargs=argparse.REMAINDER, metavar="command", help="the command, after --")
    return parser
