"""PNG plots of a comparison (matplotlib, headless): loss curves, divergence between backends, step time against
device count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Divergences of exactly 0 are drawn at this floor on the log scale.
LOG_FLOOR = 1e-18


def write_plots(results: dict[str, Any], folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator, MaxNLocator

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    title = f"{results['config']['model']} ({results['config']['dtype']}, {results['config']['optimizer']})"

    figure, axis = plt.subplots(figsize=(7, 4))
    for run in results["runs"]:
        axis.plot(range(1, len(run["losses"]) + 1), run["losses"], label=f"{run['backend']}, {run['devices']} dev",
                  linestyle="-" if run["backend"] == results["config"]["backends"][0] else "--")
    axis.set(xlabel="step", ylabel="mean loss of the batch", title=f"loss: {title}")
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.legend(fontsize=8)
    written.append(_save(figure, folder / "loss.png"))

    if results["divergence"]:
        figure, axis = plt.subplots(figsize=(7, 4))
        for entry in results["divergence"]:
            values = [max(v, LOG_FLOOR) for v in entry["max_abs_param_diff"]]
            axis.plot(range(1, len(values) + 1), values, marker=".", label=f"{entry['devices']} dev")
        pair = " vs ".join(results["divergence"][0]["backends"])
        axis.set(xlabel="step", ylabel="max |parameter difference|", yscale="log",
                 title=f"divergence {pair}: {title}")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        # Every power of ten labelled: matplotlib's default labels only a few decades over a range of ten or more.
        axis.yaxis.set_major_locator(LogLocator(base=10, numticks=30))
        axis.legend(fontsize=8)
        written.append(_save(figure, folder / "divergence.png"))

    figure, axis = plt.subplots(figsize=(7, 4))
    for backend in results["config"]["backends"]:
        runs = [r for r in results["runs"] if r["backend"] == backend]
        counts = [r["devices"] for r in runs]
        medians = [r["median_ms"] for r in runs]
        spread = [[m - r["p10_ms"] for m, r in zip(medians, runs)], [r["p90_ms"] - m for m, r in zip(medians, runs)]]
        axis.errorbar(counts, medians, yerr=spread, marker="o", capsize=4, label=backend)
    axis.set(xlabel="devices", ylabel="median step time (ms), p10-p90", title=f"step time: {title}",
             xticks=sorted({r["devices"] for r in results["runs"]}))
    axis.legend(fontsize=8)
    written.append(_save(figure, folder / "step_time.png"))
    return written


def _save(figure, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    import matplotlib.pyplot as plt

    plt.close(figure)
    return path
