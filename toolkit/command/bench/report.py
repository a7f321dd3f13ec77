"""The tables of a ``multigpu bench`` run: printed on the terminal, and as markdown for the benchmarks page
(docs/guides/benchmarks.md)."""

from __future__ import annotations

import sys
from typing import Any

from toolkit.command.bench.schema import LABELS
from toolkit.command.flops import PEAK_REPEATS


def ratio_label(ratio: dict[str, Any]) -> str:
    """What a ratio divides by what, in words.

    Args:
        ratio: one entry of the results' ``ratios``.

    Returns:
        E.g. ``"toolkit DataParallel / tf.function step"``, or ``"..., n devices / 1 device"`` for scaling.
    """
    top, bottom = LABELS.get(ratio["candidate"], ratio["candidate"]), LABELS.get(ratio["baseline"], ratio["baseline"])
    if ratio["candidate"] == ratio["baseline"]:
        return f"{top}, n devices / 1 device"
    where = ", 1 device" if ratio["baseline_devices"] == 1 and ratio["devices"] > 1 else ""
    return f"{top} / {bottom}{where}"


def peak_sentence(results: dict[str, Any]) -> str:
    """The machine's measured peak and how a step's FLOPs are counted, in words.

    Args:
        results: a bench run's results.

    Returns:
        One paragraph.
    """
    peak = results["peak"]
    speeds = ", ".join(f"{library} {gflops:.1f}" for library, gflops in peak["gflops"].items())
    return (f"Machine peak, {peak['dtype']} {peak['size']}x{peak['size']} matmul, best of {PEAK_REPEATS}: {speeds} "
            "GFLOP/s. A model's FLOPs per step count its matmuls and convolutions (backward counted as twice the "
            "forward); a candidate's GFLOP/s are that over its median step time.")


def _source(entry: dict[str, Any]) -> str:
    """An input candidate's source in words (``"from tf.data"``)."""
    return LABELS[entry["candidate"]].removeprefix("toolkit fit, ")


def _mb(value: float | None) -> str:
    return "" if value is None else f"{value:.0f}"


def _model_markdown(model: str, runs: list[dict[str, Any]], model_ratios: list[dict[str, Any]],
                    rounds: int) -> list[str]:
    first = runs[0]
    kind = "compute-bound" if first.get("compute_bound") else "dispatch-bound"
    counts = sorted({r["devices"] for r in runs})
    head = " | ".join(f"{n} device{'s' if n > 1 else ''}" for n in counts)
    lines = [f"**{model}**: global batch {first['batch']}, {first['steps']} steps a round, "
             f"{first['gflop_per_step']:.4g} GFLOP a step ({kind}).", "",
             f"| ms a step, median of {rounds} rounds (GFLOP/s, share of peak) | {head} | first step, 1 device | "
             "peak memory MiB, first cycle / step, 1 device |", "|---" * (len(counts) + 3) + "|"]
    rows: dict[str, dict[int, dict[str, Any]]] = {}
    for run in runs:
        rows.setdefault(f"{run['backend']}: {run['label']}", {})[run["devices"]] = run
    for label, by_count in rows.items():
        cells = [f"{by_count[n]['median_ms']:.2f} ({by_count[n]['gflops']:.1f}, {by_count[n]['peak_fraction']:.0%})"
                 if n in by_count else "" for n in counts]
        one = by_count.get(1)
        extra = ["", ""] if one is None else [f"{one['compile_s']:.2f} s",
                                              f"{_mb(one['first_peak_mb'])} / {_mb(one['step_peak_mb'])}"]
        lines.append(f"| {label} | " + " | ".join(cells + extra) + " |")
    lines += ["", f"| ratio (90% bootstrap interval) | {head} | target |", "|---" * (len(counts) + 2) + "|"]
    grouped: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for r in model_ratios:
        grouped.setdefault((r["backend"], ratio_label(r)), {})[r["devices"]] = r
    for (backend, label), by_count in grouped.items():
        cells = [f"{by_count[n]['ratio']:.2f} ({by_count[n]['low']:.2f}-{by_count[n]['high']:.2f})"
                 if n in by_count else "" for n in counts]
        judged = {n: r for n, r in by_count.items() if r["target"] is not None}
        target = ""
        if judged:
            bound = next(iter(judged.values()))["target"]
            target = f"<= {bound}: " + "; ".join(f"{r['verdict']} at {n}" for n, r in sorted(judged.items()))
        lines.append(f"| {backend}: {label} | " + " | ".join(cells) + f" | {target} |")
    hosted = [r for r in runs if r.get("host_ms") is not None]
    if hosted:
        parts = "; ".join(f"{r['backend']}: {r['label']}, {r['devices']} device{'s' if r['devices'] > 1 else ''}: "
                          f"{r['host_ms']:.3f} of {r['median_ms']:.3f} ms ({r['host_ms'] / r['median_ms']:.0%})"
                          for r in hosted)
        lines += ["", "The toolkit's host work a step (its step outside the backend's compiled call: the batch checks, "
                      f"the examples' keys, the split; median of rounds): {parts}."]
    return lines


def markdown(results: dict[str, Any]) -> str:
    """The benchmarks page's tables of a bench run: the settings and machine, the peak, then per model its step times
    (achieved GFLOP/s, share of peak, first step, memory) and every ratio with its interval and verdict, then each
    backend's toolkit step over the fastest backend's, then the fractions of peak of the compute-bound models.

    Args:
        results: a bench run's results (:mod:`toolkit.command.bench.schema`).

    Returns:
        The markdown, ending in a newline.
    """
    config, where = results["config"], results["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in where["versions"].items())
    lines = [f"SGD({config['lr']}), {config['dtype']}, {config['rounds']} rounds; {where['cpu']}, {where['cores']} "
             f"cores, Python {where['python']}, {versions}.", "", peak_sentence(results)]
    models = list(dict.fromkeys(r.get("model", "") for r in results["runs"]))
    for model in models:
        lines += [""] + _model_markdown(model, [r for r in results["runs"] if r.get("model", "") == model],
                                        [r for r in results["ratios"] if r.get("model", "") == model],
                                        config["rounds"])
    if results.get("cross_backend"):
        lines += ["", "| model, devices: backend, toolkit candidate | ms a step | over the fastest backend's toolkit "
                  "step (90% interval) | target | share of the best peak | its products alone, GFLOP/s |",
                  "|---|---|---|---|---|---|"]
        for c in results["cross_backend"]:
            target = "" if c["target"] is None else f"<= {c['target']}: {c['verdict']}"
            alone = c.get("products_alone_gflops")
            lines.append(f"| {c['model']}, {c['devices']}: {c['backend']}, {LABELS.get(c['candidate'], c['candidate'])}"
                         f" | {c['median_ms']:.1f} | {c['ratio']:.2f} ({c['low']:.2f}-{c['high']:.2f}) over "
                         f"{c['fastest']} | {target} | {c['peak_fraction']:.1%} | "
                         f"{'' if alone is None else f'{alone:.1f}'} |")
    if results.get("fractions"):
        lines += ["", "| compute-bound model: toolkit, 1 device | share of the best peak (90% interval) | target | "
                  "its matmuls and convolutions alone: share of the best peak | the step's speed / theirs |",
                  "|---|---|---|---|---|"]
        for f in results["fractions"]:
            target = "" if f["target"] is None else f">= {f['target']:.0%}: {f['verdict']}"
            alone, of = f.get("products_alone_fraction"), f.get("of_products_alone")
            lines.append(f"| {f['model']}: {f['backend']} | {f['fraction']:.1%} ({f['low']:.1%}-{f['high']:.1%}) | "
                         f"{target} | {'' if alone is None else f'{alone:.1%}'} | "
                         f"{'' if of is None else f'{of:.0%}'} |")
    if results.get("inputs"):
        lines += ["", "| input: model, backend, devices | the toolkit's fit from it: throughput over fit from arrays "
                  "(90% interval) | target |", "|---|---|---|"]
        for i in results["inputs"]:
            lines.append(f"| {_source(i)}: {i['model']}, {i['backend']}, "
                         f"{i['devices']} | {i['throughput']:.2f} ({i['low']:.2f}-{i['high']:.2f}) | "
                         f">= {i['target']}: {i['verdict']} |")
    return "\n".join(lines) + "\n"


def print_report(results: dict[str, Any]) -> None:
    """Print a bench run's tables on the terminal: per model its step times and its ratios, then the cross-backend
    ratios, the peak, the fractions of peak and the machine.

    Args:
        results: a bench run's results (:mod:`toolkit.command.bench.schema`).
    """
    from rich.console import Console
    from rich.table import Table

    config, machine = results["config"], results["machine"]
    console = Console(width=None if sys.stdout.isatty() else 170)
    used = {(u["model"], u["backend"], u["candidate"], u["devices"]): u["devices_used"] for u in results["runs"]}
    for model in dict.fromkeys(r["model"] for r in results["runs"]):
        mine = [r for r in results["runs"] if r["model"] == model]
        first = mine[0]
        runs = Table(title=f"{model}, SGD, {config['dtype']}, batch {first['batch']}, {first['gflop_per_step']:.4g} "
                           f"GFLOP a step: step time, median of {config['rounds']} rounds of {first['steps']} steps")
        for column in ("devices", "backend", "code", "median", "min-max", "first step", "memory MiB", "GFLOP/s",
                       "of peak", "vs toolkit", "products by"):
            runs.add_column(column, justify="left" if column == "code" else "right")
        for run in mine:
            memory = "-" if run["step_peak_mb"] is None else f"{run['first_peak_mb']:.0f}/{run['step_peak_mb']:.0f}"
            runs.add_row(str(run["devices"]), run["backend"], run["label"], f"{run['median_ms']:.3f} ms",
                         f"{run['min_ms']:.2f}-{run['max_ms']:.2f}", f"{run['compile_s']:.2f} s", memory,
                         f"{run['gflops']:.2f}", f"{run['peak_fraction']:.1%}",
                         "-" if run["param_diff"] is None else f"{run['param_diff']:.1e}", run.get("library", ""))
        console.print(runs)
        ratios = Table(title=f"{model}: ratios (lower is faster; < 1: the toolkit is faster), with a 90% bootstrap "
                             "interval")
        for column in ("backend", "toolkit", "over", "ratio", "interval", "target", "verdict"):
            ratios.add_column(column, justify="right" if column in ("ratio", "interval", "target") else "left")
        for r in (r for r in results["ratios"] if r["model"] == model):
            baseline_used = used[(model, r["backend"], r["baseline"], r["baseline_devices"])]
            over = (f"{LABELS.get(r['baseline'], r['baseline'])}, {baseline_used} dev"
                    if r["baseline"] != r["candidate"] else f"itself on {r['baseline_devices']} device")
            ratios.add_row(r["backend"], f"{LABELS.get(r['candidate'], r['candidate'])}, {r['devices']} dev", over,
                           f"{r['ratio']:.2f}", f"{r['low']:.2f}-{r['high']:.2f}",
                           "-" if r["target"] is None else f"<= {r['target']}",
                           {None: "", "not met": "NOT MET"}.get(r["verdict"], r["verdict"]))
        console.print(ratios)
    if results.get("cross_backend"):
        across = Table(title="across backends: each toolkit step over the fastest backend's toolkit step, same "
                             "process, 90% bootstrap interval")
        for column in ("model", "devices", "backend", "code", "median", "over fastest", "interval", "target",
                       "verdict", "of peak"):
            across.add_column(column, justify="left" if column in ("model", "backend", "code", "verdict")
                              else "right")
        for c in results["cross_backend"]:
            across.add_row(c["model"], str(c["devices"]), c["backend"], LABELS.get(c["candidate"], c["candidate"]),
                           f"{c['median_ms']:.1f} ms", f"{c['ratio']:.2f} ({c['fastest']})",
                           f"{c['low']:.2f}-{c['high']:.2f}", "-" if c["target"] is None else f"<= {c['target']}",
                           {None: "", "not met": "NOT MET"}.get(c["verdict"], c["verdict"]),
                           f"{c['peak_fraction']:.1%}")
        console.print(across)
    if results.get("inputs"):
        fed = Table(title="inputs: the toolkit's fit from a source over its fit from arrays, throughput (higher is "
                          "faster), same process, 90% bootstrap interval")
        for column in ("model", "backend", "devices", "source", "throughput", "interval", "target", "verdict"):
            fed.add_column(column, justify="right" if column in ("devices", "throughput", "interval", "target")
                           else "left")
        for i in results["inputs"]:
            fed.add_row(i["model"], i["backend"], str(i["devices"]), _source(i), f"{i['throughput']:.2f}",
                        f"{i['low']:.2f}-{i['high']:.2f}", f">= {i['target']}",
                        {"not met": "NOT MET"}.get(i["verdict"], i["verdict"]))
        console.print(fed)
    console.print(peak_sentence(results))
    for f in results["fractions"]:
        judged = "" if f["target"] is None else f" (target >= {f['target']:.0%}: {f['verdict']})"
        print(f"{f['model']}, {f['backend']} toolkit on 1 device: {f['fraction']:.1%} of the best peak "
              f"({f['low']:.1%}-{f['high']:.1%}){judged}")
    print(f"machine: {machine['cpu']}, {machine['cores']} cores, {machine['platform']}, "
          + ", ".join(f"{k} {v}" for k, v in machine["versions"].items()))
    print("vs toolkit: max |difference| / max |value| of the parameters and model state after the same steps (a "
          "check that the codes compared do the same training); memory: peak resident MiB added during the "
          "warm-up cycle / during a timed round")
