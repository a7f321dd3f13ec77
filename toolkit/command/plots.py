"""PNG plots of a comparison (matplotlib, headless): loss curves, divergence between backends, step time against
device count, every pair of runs' relative divergence by kind (``pairs.png``) and each metric over seeds
(``seeds.png``)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from toolkit.command.seed_stats import METRICS

#: Divergences of exactly 0 are drawn at this floor on the log scale.
LOG_FLOOR = 1e-18
#: How each kind of pair is drawn in ``pairs.png``: the framework pairs solid, their baseline (one backend's own runs
#: on other device counts) dashed.
KIND_STYLES = {"framework": ("tab:red", "-"), "order": ("tab:blue", "--"), "both": ("tab:gray", ":")}


def write_plots(results: dict[str, Any], folder: Path) -> list[Path]:
    """Draw a comparison's plots as PNG files: ``loss.png``, ``divergence.png``, ``step_time.png``, and where they
    apply ``pairs.png`` (two runs or more) and ``seeds.png`` (two seeds or more).

    Args:
        results: a comparison's results (:mod:`toolkit.command.compare`).
        folder: where the files go (made if missing).

    Returns:
        The files written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import LogLocator, MaxNLocator

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    title = f"{results['config']['model']} ({results['config']['dtype']}, {results['config']['optimizer']})"

    seeds = list(dict.fromkeys(run.get("seed", 0) for run in results["runs"]))
    figure, axis = plt.subplots(figsize=(7, 4))
    colours: dict[tuple[str, int], Any] = {}
    for run in results["runs"]:  # over seeds: one colour and one label per backend and device count
        key = (run["backend"], run["devices"])
        line, = axis.plot(range(1, len(run["losses"]) + 1), run["losses"], color=colours.get(key),
                          label=None if key in colours else f"{run['backend']}, {run['devices']} dev",
                          linestyle="-" if run["backend"] == results["config"]["backends"][0] else "--",
                          alpha=1.0 if len(seeds) == 1 else 0.6)
        colours.setdefault(key, line.get_color())
    axis.set(xlabel="step", ylabel="mean loss of the batch", title=f"loss: {title}")
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.legend(fontsize=8)
    written.append(_save(figure, folder / "loss.png"))

    if results["divergence"]:
        figure, axis = plt.subplots(figsize=(7, 4))
        shown: dict[int, Any] = {}
        for entry in results["divergence"]:
            values = [max(v, LOG_FLOOR) for v in entry["max_abs_param_diff"]]
            line, = axis.plot(range(1, len(values) + 1), values, marker=".", color=shown.get(entry["devices"]),
                              label=None if entry["devices"] in shown else f"{entry['devices']} dev")
            shown.setdefault(entry["devices"], line.get_color())
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
        counts = list(dict.fromkeys(r["devices"] for r in results["runs"] if r["backend"] == backend))
        # over seeds, the median of each: one point per device count
        times = {field: [statistics.median(r[field] for r in results["runs"]
                                           if r["backend"] == backend and r["devices"] == n) for n in counts]
                 for field in ("median_ms", "p10_ms", "p90_ms")}
        medians = times["median_ms"]
        spread = [[m - low for m, low in zip(medians, times["p10_ms"])],
                  [high - m for m, high in zip(medians, times["p90_ms"])]]
        axis.errorbar(counts, medians, yerr=spread, marker="o", capsize=4, label=backend)
    axis.set(xlabel="devices", ylabel="median step time (ms), p10-p90", title=f"step time: {title}",
             xticks=sorted({r["devices"] for r in results["runs"]}))
    axis.legend(fontsize=8)
    written.append(_save(figure, folder / "step_time.png"))
    if results.get("pairs"):
        written.append(_pairs_plot(plt, results, folder / "pairs.png", title))
    if len(seeds) > 1:
        written.append(_seeds_plot(plt, results, folder / "seeds.png", title))
    return written


def _pairs_plot(plt, results: dict[str, Any], path: Path, title: str) -> Path:
    """Every pair of runs' largest per-parameter relative divergence after each step (every seed), coloured by
    kind, with the bound where a pair parts."""
    from matplotlib.ticker import LogLocator, MaxNLocator

    figure, axis = plt.subplots(figsize=(7, 4))
    labelled = set()
    for pair in results["pairs"]:
        colour, style = KIND_STYLES[pair["kind"]]
        values = [max(v, LOG_FLOOR) for v in pair["max_rel_param_diff"]]
        axis.plot(range(1, len(values) + 1), values, color=colour, linestyle=style, alpha=0.7, linewidth=1,
                  label=None if pair["kind"] in labelled else f"{pair['kind']} pairs")
        labelled.add(pair["kind"])
    axis.axhline(results["split_bound"], color="black", linewidth=0.8, linestyle="-.",
                 label=f"parts past {results['split_bound']:g}")
    axis.set(xlabel="step", ylabel="max over parameters of max |a - b|\nover the largest |parameter|", yscale="log",
             title=f"where runs part: {title}")
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.yaxis.set_major_locator(LogLocator(base=10, numticks=30))
    axis.legend(fontsize=8)
    return _save(figure, path)


def _seeds_plot(plt, results: dict[str, Any], path: Path, title: str) -> Path:
    """Each metric of every run over seeds: a line per seed through its runs (the paired differences are the
    slopes), the mean of each run marked."""
    keys = list(dict.fromkeys((r["backend"], r["devices"]) for r in results["runs"]))
    metrics = [name for name, value in METRICS.items() if all(value(r) is not None for r in results["runs"])]
    figure, axes = plt.subplots(1, len(metrics), figsize=(4.5 * len(metrics), 4), squeeze=False)
    for axis, metric in zip(axes[0], metrics):
        value = METRICS[metric]
        by_seed: dict[int, dict[tuple[str, int], float]] = {}
        for run in results["runs"]:
            by_seed.setdefault(run.get("seed", 0), {})[(run["backend"], run["devices"])] = value(run)
        for found in by_seed.values():
            axis.plot(range(len(keys)), [found.get(key, float("nan")) for key in keys], color="tab:gray",
                      alpha=0.5, marker=".", linewidth=0.8)
        means = [statistics.mean(found[key] for found in by_seed.values() if key in found) for key in keys]
        axis.plot(range(len(keys)), means, color="black", marker="D", linestyle="none", label="mean over seeds")
        axis.set_xticks(range(len(keys)), [f"{b}\nx{n}" for b, n in keys], fontsize=8)
        axis.set(ylabel=metric.replace("_", " "), title=f"{metric.replace('_', ' ')}, {len(by_seed)} seeds")
        axis.legend(fontsize=8)
    figure.suptitle(title, fontsize=9)
    return _save(figure, path)


def _save(figure, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    import matplotlib.pyplot as plt

    plt.close(figure)
    return path
