"""``multigpu determinism``: the same comparison twice, each in a fresh process, and whether every run came out
bit-identical: every step's loss and every final parameter, compared exactly. Where a run differs, the first step
whose loss differs and the parameters that differ are named.

A reviewer's first question of any framework comparison: is a gap between two frameworks more than the gap between
one framework and itself? Two runs in one process share in-memory caches, compiled functions and allocator state;
fresh processes share only what is on disk (the Theano family's compiled-module cache among it, which holds the same
code either way), so what differs between them is the framework's own nondeterminism (thread scheduling in a
reduction, an autotuner's choice), which no seed controls.
"""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from toolkit.command.compare import load_params
from toolkit.errors import ArgumentError

#: The folders, under ``--out``, of the two runs.
RUNS = ("first", "second")


def compare_argv(args: Any) -> list[str]:
    """The ``multigpu compare`` options that repeat a ``determinism`` request's run (every option it shares with
    compare, ``--out`` aside).

    Args:
        args: the parsed ``determinism`` options.

    Returns:
        The arguments, as a command line takes them.
    """
    forwarded = {"--model": args.model, "--backends": ",".join(args.backends),
                 "--devices": ",".join(map(str, args.devices)), "--dtype": args.dtype, "--optimizer": args.optimizer,
                 "--lr": args.lr, "--eps": args.eps, "--steps": args.steps, "--batch": args.batch, "--seed": args.seed,
                 "--init-seed": args.init_seed, "--data-seed": args.data_seed, "--noise-seed": args.noise_seed,
                 "--perturb": args.perturb}
    return [str(part) for key, value in forwarded.items() if value is not None for part in (key, value)]


def run_twice(compare_argv: list[str], out: Path, timeout: float) -> tuple[Path, Path]:
    """``multigpu compare`` with ``compare_argv`` in two fresh processes, one after the other.

    Args:
        compare_argv: the compare options (no ``--out``).
        out: the folder whose :data:`RUNS` subfolders receive the two runs.
        timeout: seconds allowed per process.

    Returns:
        The two results.json files.

    Raises:
        ArgumentError: a process failed or ran out of time (its last lines of stderr quoted).
    """
    found = []
    for name in RUNS:
        folder = Path(out) / name
        argv = [sys.executable, "-m", "toolkit", "compare", *compare_argv, "--out", str(folder), "--quiet"]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=dict(os.environ))
        except subprocess.TimeoutExpired:
            raise ArgumentError(f"the {name} run took more than {timeout:g} s (--timeout)") from None
        if done.returncode != 0:
            tail = " | ".join(done.stderr.strip().splitlines()[-3:])
            raise ArgumentError(f"the {name} run failed (exit {done.returncode}): {tail}")
        found.append(folder / "results.json")
    return found[0], found[1]


def differences(first: Path, second: Path) -> list[dict[str, Any]]:
    """Every run of two results.json files (with their params.npz) compared exactly.

    Args:
        first: one run's results.json.
        second: the other's, of the same comparison.

    Returns:
        One record per run (backend, device count, seed of the first seed's parameters): ``backend``, ``devices``,
        ``identical``, ``steps``, ``first_loss_step`` (the first step, from 1, whose loss differs, or None),
        ``losses`` (the two losses there, or None), ``params`` (the names of the parameters that differ),
        ``max_param_diff`` (the largest |difference| among them, 0.0 where none, NaN where one side is NaN and the
        other is not).

    Raises:
        ArgumentError: the two files do not hold the same runs, or a parameter is missing from one of them.
    """
    runs = [{(r["backend"], r["devices"], r.get("seed")): r for r in json.loads(Path(p).read_text())["runs"]}
            for p in (first, second)]
    if set(runs[0]) != set(runs[1]):
        raise ArgumentError(f"{first} and {second} hold different runs: {sorted(runs[0])} and {sorted(runs[1])}")
    params = [load_params(p) for p in (first, second)]
    out = []
    for key, one in runs[0].items():
        other = runs[1][key]
        step = next((t for t, (a, b) in enumerate(zip(one["losses"], other["losses"])) if not _same(a, b)), None)
        if step is None and len(one["losses"]) != len(other["losses"]):
            step = min(len(one["losses"]), len(other["losses"]))
        differ, largest = [], 0.0
        if (key[0], key[1]) in params[0]:
            mine, theirs = params[0][(key[0], key[1])], params[1].get((key[0], key[1]), {})
            if set(mine) != set(theirs):
                raise ArgumentError(f"the parameters of {key[0]} x{key[1]} differ in name: {sorted(mine)} and "
                                    f"{sorted(theirs)}")
            for name in mine:
                a, b = mine[name], theirs[name]
                if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
                    differ.append(name)
                    if a.shape == b.shape and a.size:
                        gap = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
                        largest = gap if math.isnan(gap) or math.isnan(largest) else max(largest, gap)
        out.append({"backend": key[0], "devices": key[1], "identical": step is None and not differ,
                    "steps": len(one["losses"]), "first_loss_step": None if step is None else step + 1,
                    "losses": None if step is None or step >= len(one["losses"]) or step >= len(other["losses"])
                    else [one["losses"][step], other["losses"][step]],
                    "params": differ, "max_param_diff": largest})
    return out


def _same(a: float, b: float) -> bool:
    """Two losses bit for bit (a NaN equals a NaN, as JSON writes them; 0.0 and -0.0 differ)."""
    return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))


def print_differences(records: list[dict[str, Any]]) -> None:
    """One line per run: bit-identical, or where it differs.

    Args:
        records: :func:`differences`' records.
    """
    for r in records:
        head = f"{r['backend']} x{r['devices']}: "
        if r["identical"]:
            print(head + f"bit-identical in two fresh processes ({r['steps']} losses and every final parameter)")
            continue
        parts = []
        if r["first_loss_step"] is not None:
            losses = "" if r["losses"] is None else f" ({r['losses'][0]!r} vs {r['losses'][1]!r})"
            parts.append(f"losses first differ at step {r['first_loss_step']}{losses}")
        if r["params"]:
            parts.append(f"final parameters {', '.join(r['params'][:5])} differ (max |difference| "
                         f"{r['max_param_diff']:.3g})")
        print(head + "DIFFERS: " + "; ".join(parts))
