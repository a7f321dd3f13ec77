"""Draw a ``multigpu bench`` run's targets as one picture for docs/guides/benchmarks.md: per model, every ratio that has
a target (the toolkit's step over a native's, over plain ``jax.jit``, n devices over one), drawn at its median with
its 90% bootstrap interval on a log scale, the target as a mark, coloured by the verdict. The tables on the page are
the same numbers; the picture shows at a glance which targets are met, which are within the machine's noise and
which are not.

    python docs/bench_chart.py                                           # docs/bench.json -> docs/bench.png
    python docs/bench_chart.py docs/pytensor/bench.json docs/pytensor/bench.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The colour of each verdict (``toolkit/command/bench/targets.py`` gives them).
VERDICT_COLOURS = {"met": "tab:green", "within noise": "tab:orange", "not met": "tab:red"}
#: The ratios labelled on the axis, where the data reach them.
TICKS = (0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0)


def _labels(results: dict) -> dict[tuple[str, str], str]:
    """Each candidate's label by (backend, candidate), as the run printed it."""
    return {(run["backend"], run["candidate"]): run["label"] for run in results["runs"]}


def _row_name(ratio: dict, labels: dict[tuple[str, str], str]) -> str:
    """What a ratio compares, short: the numerator is always the toolkit's step (its own label less the trainer's
    name), the denominator a native, plain JAX, or the same step on one device."""
    backend, candidate = ratio["backend"], ratio["candidate"]
    name = labels[backend, candidate].replace("toolkit DataParallel", "toolkit")
    if candidate == ratio["baseline"]:  # scaling: a candidate on n devices over itself on one
        return f"{backend}: {name}, {ratio['devices']} devices / 1 device"
    count = f" on {ratio['devices']} devices" if ratio["devices"] > 1 else ""
    return f"{backend}: {name}{count} / {labels[backend, ratio['baseline']]}"


def draw(results: dict, path: Path) -> Path:
    """Draw the targets of a bench run.

    Args:
        results: a ``bench.json``'s contents (schema ``multigpu-toolkit/bench``).
        path: the PNG file to write.

    Returns:
        ``path``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullLocator

    labels = _labels(results)
    targeted = [r for r in results["ratios"] if r.get("target") is not None]
    models = list(dict.fromkeys(r["model"] for r in targeted))
    rows = [[r for r in targeted if r["model"] == model] for model in models]
    figure, axes = plt.subplots(len(models), 1, figsize=(10, 0.3 * len(targeted) + 1.0 * len(models)), sharex=True,
                                layout="constrained", gridspec_kw={"height_ratios": [len(r) for r in rows]},
                                squeeze=False)
    for axis, model, entries in zip(axes[:, 0], models, rows):
        for y, ratio in enumerate(entries):
            colour = VERDICT_COLOURS.get(ratio["verdict"], "tab:gray")
            axis.plot([ratio["low"], ratio["high"]], [y, y], color=colour, linewidth=2.5, solid_capstyle="butt")
            axis.plot(ratio["ratio"], y, "o", color=colour, markersize=5)
            axis.plot(ratio["target"], y, "|", color="black", markersize=12, markeredgewidth=1.5)
        axis.set_yticks(range(len(entries)), [_row_name(r, labels) for r in entries], fontsize=7.5)
        axis.set_ylim(len(entries) - 0.5, -0.5)
        axis.axvline(1.0, color="gray", linewidth=0.6, linestyle=":")
        axis.set_title(model, fontsize=9, loc="left")
    axis = axes[-1, 0]
    axis.set_xscale("log")
    low = min(r["low"] for r in targeted)
    high = max(max(r["high"], r["target"]) for r in targeted)
    ticks = [t for t in TICKS if low / 1.2 <= t <= high * 1.2]
    axis.set_xticks(ticks, [f"{t:g}x" for t in ticks], fontsize=7.5)
    axis.xaxis.set_minor_locator(NullLocator())
    axis.set_xlabel("the toolkit's median step over the other's, with its 90% interval (log scale); | the target",
                    fontsize=8)
    figure.legend(handles=[Line2D([], [], color=c, marker="o", linewidth=2.5, label=v)
                           for v, c in VERDICT_COLOURS.items()], fontsize=8, loc="outside upper right", ncols=3)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def main(argv: list[str]) -> None:
    source = Path(argv[0]) if argv else ROOT / "docs" / "bench.json"
    target = Path(argv[1]) if len(argv) > 1 else source.with_suffix(".png")
    print(f"wrote {draw(json.loads(source.read_text()), target)}")


if __name__ == "__main__":
    main(sys.argv[1:])
