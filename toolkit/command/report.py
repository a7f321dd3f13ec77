"""One self-contained HTML report of one or many result folders (``multigpu report DIR...``): per folder, what was
run, the runs, the gap between backends against the spread over seeds, where pairs of runs part, the plots
(embedded as data URIs, so the file can be mailed or archived alone) and a localization (``localize.json``) where
the folder has one. No framework and no network: the HTML is written here from the JSON files."""

from __future__ import annotations

import base64
import csv
import html
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolkit.command.compare_tables import first_in
from toolkit.command.divergence import PAIR_KINDS, pair_label
from toolkit.command.seed_stats import INTERVAL_LEVEL, parted_words
from toolkit.command.sweep import SWEEP_NOTE
from toolkit.command.timing import busy_note
from toolkit.errors import ArgumentError
from toolkit.version import __version__

#: The plots a comparison writes, in the order the report shows them, with what each shows.
PLOTS = {
    "loss.png": "training loss per step, every run",
    "divergence.png": "max |parameter difference| between the backends, per step",
    "step_time.png": "step time against device count",
    "pairs.png": "relative divergence of every pair of runs, by kind (framework solid, summation order dashed)",
    "seeds.png": "each metric over seeds",
}

_STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1f; margin: 2em auto;
       max-width: 1100px; padding: 0 1.5em; }
h1 { font-size: 1.6em; margin-bottom: .2em; } h2 { margin-top: 2.2em; border-bottom: 2px solid #ddd; }
h3 { margin-top: 1.6em; } h4 { margin: 1.2em 0 .3em; } p.note { color: #555; font-size: .9em; margin-top: .3em; }
table { border-collapse: collapse; margin: .6em 0; font-size: .9em; }
th, td { padding: .3em .7em; border-bottom: 1px solid #e3e3e3; text-align: right; white-space: nowrap; }
th { background: #f4f4f6; white-space: normal; vertical-align: bottom; } div.wide { overflow-x: auto; }
td.text, th.text { text-align: left; }
tr.past td { background: #fde8e8; } code { background: #f4f4f6; padding: 0 .25em; border-radius: 3px; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: .9em; } ul.findings li { margin: .2em 0; }
nav ul { columns: 2; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value))


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], text_columns: int = 1,
           marked: Sequence[bool] = (), last_text: bool = False) -> str:
    """An HTML table; the first ``text_columns`` columns (and the last, with ``last_text``) left-aligned, the others
    (numbers) right-aligned; rows whose ``marked`` entry is true highlighted."""
    def cell(tag: str, i: int, value: Any) -> str:
        text = i < text_columns or (last_text and i == len(headers) - 1)
        return f"<{tag}{' class=text' if text else ''}>{_e(value)}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "".join(f"<tr{' class=past' if i < len(marked) and marked[i] else ''}>"
                   + "".join(cell("td", j, v) for j, v in enumerate(row)) + "</tr>" for i, row in enumerate(rows))
    return f"<div class=wide><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def _mean_sd(values: list[float], digits: int) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def _signed(value: float) -> str:
    return "0" if value == 0 else f"{value:+.2g}"


def _steps(steps: list[int | None]) -> str:
    parted = sorted(s for s in steps if s is not None)
    if not parted:
        return "-"
    return str(parted[0]) if parted[0] == parted[-1] else f"{parted[0]}-{parted[-1]}"


def _seeds(results: dict[str, Any]) -> list[int]:
    return list(dict.fromkeys(run.get("seed", 0) for run in results["runs"]))


def _setup(config: dict[str, Any], seeds: list[int]) -> str:
    over = f"seeds {', '.join(map(str, seeds))}" if len(seeds) > 1 else f"seed {seeds[0]}"
    return (f"{_e(config['model'])}: {_e(', '.join(config['backends']))} on "
            f"{_e(', '.join(map(str, config['devices'])))} device(s); {_e(config['optimizer'])}({_e(config['lr'])}), "
            f"{_e(config['dtype'])}, batch {_e(config['batch'])}, {_e(config['steps'])} steps, {_e(over)}"
            + (f"; PERTURBED (--perturb {_e(config['perturb'])}): not the backends' own numbers"
               if config.get("perturb") else ""))


def runs_section(results: dict[str, Any]) -> str:
    """The runs, one row per backend and device count (over seeds: mean ± standard deviation).

    Args:
        results: a comparison's results (:mod:`toolkit.command.compare`), with ``config``.

    Returns:
        The HTML.
    """
    grouped: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for run in results["runs"]:
        grouped.setdefault((run["backend"], run["devices"]), []).append(run)
    rows = []
    for (backend, devices), runs in grouped.items():
        scores = [run["accuracy"] for run in runs if run["accuracy"] is not None]
        rows.append([backend, devices, _mean_sd([run["losses"][-1] for run in runs], 6),
                     f"{runs[0]['first_step_ms']:.0f} ms", f"{statistics.median(r['median_ms'] for r in runs):.2f} ms",
                     f"{statistics.median(r['p10_ms'] for r in runs):.2f}-"
                     f"{statistics.median(r['p90_ms'] for r in runs):.2f}",
                     f"{max(run['peak_rss_mb'] for run in runs):.0f} MB", _mean_sd(scores, 3)])
    note = ("first step: includes tracing (TensorFlow) or compilation (the Theano family); step times in ms, "
            "median and 10th-90th percentile over steps 2 onwards; peak RSS: the process's, so far")
    if len(_seeds(results)) > 1:
        note += "; over seeds: mean ± standard deviation, the first seed's first step, medians of the step times"
    return ("<h3>Runs</h3>" + _table(["backend", "devices", "final loss", "first step", "median step", "p10-p90",
                                      "peak RSS", "test accuracy"], rows, 1) + f"<p class=note>{_e(note)}</p>")


def statistics_section(results: dict[str, Any]) -> str:
    """Per metric, the gap between runs paired by seed with its t interval, against the spread over seeds; empty
    with one seed.

    Args:
        results: a comparison's results.

    Returns:
        The HTML.
    """
    entries = results.get("statistics", [])
    if len(_seeds(results)) < 2 or not entries:
        return ""
    rows = []
    for kind in ("framework", "order"):
        for entry in (e for e in entries if e["kind"] == kind):
            interval = _signed(entry["mean_difference"]) if entry["low"] is None else \
                f"{_signed(entry['mean_difference'])} ({_signed(entry['low'])}, {_signed(entry['high'])})"
            spread, ratio = entry["seed_spread"], entry["gap_over_spread"]
            rows.append([entry["metric"], kind, f"{entry['a']['backend']} x{entry['a']['devices']}",
                         f"{entry['b']['backend']} x{entry['b']['devices']}", f"{entry['mean_a']:.4g}",
                         f"{entry['mean_b']:.4g}", interval, "-" if spread is None else f"{spread:.3g}",
                         "-" if ratio is None else f"{ratio:.2g}"])
    return (f"<h3>The gap against the seed spread</h3><p>Paired over {len(_seeds(results))} seeds: per seed the "
            f"difference a - b, then its mean with a {INTERVAL_LEVEL:.0%} Student t interval, beside the standard "
            "deviation over seeds.</p>"
            + _table(["metric", "kind", "a", "b", "mean a", "mean b", "a - b (interval)", "seed spread (sd)",
                      "|gap| / spread"], rows, 4)
            + "<p class=note>framework: two backends on one device count; order: one backend on two device counts "
              "(the summation order alone). An interval that holds 0 is a gap these seeds cannot tell from none.</p>")


def pairs_section(results: dict[str, Any]) -> str:
    """Where pairs of runs part: per kind (the framework beside the summation order), then every pair.

    Args:
        results: a comparison's results.

    Returns:
        The HTML; empty without pairs.
    """
    if not results.get("pair_summary"):
        return ""
    seeds = len(_seeds(results))
    kinds = [[e["kind"], PAIR_KINDS[e["kind"]], e["pairs"], e["parted"], _steps(e["split_steps"]),
              f"{e['step1_median']:.2g}, {e['step1_max']:.2g}", f"{e['final_median']:.2g}, {e['final_max']:.2g}"]
             for e in results["kind_summary"]]
    pairs = [[pair_label(p), p["kind"], f"{p['step1_median']:.2g}", f"{p['final_median']:.2g}",
              f"{p['parted']}/{p['seeds']}", _steps(p["split_steps"]), first_in(p)]
             for kind in PAIR_KINDS for p in results["pair_summary"] if p["kind"] == kind]
    over = "" if seeds == 1 else f", medians over {seeds} seeds"
    return ("<h3>Where runs part</h3><p>Every pair of runs of a seed, compared after every step: the largest over "
            "parameters of max |a - b| over the largest |parameter|; a pair parts at the first step past "
            f"{results['split_bound']:g}.</p>"
            + _table(["kind", "what differs", "pairs", "part", "at steps", "after step 1 (median, max)",
                      "after the last (median, max)"], kinds, 2)
            + (f"<p>{html.escape(parted_words(results['parted_test']))}</p>" if results.get("parted_test") else "")
            + _table(["pair", "kind", f"after step 1{over}", "after the last", "parts", "at step", "first in"],
                     pairs, 2,
                     [p["split_steps"] != [None] * len(p["split_steps"]) for kind in PAIR_KINDS
                      for p in results["pair_summary"] if p["kind"] == kind]))


def plots_section(folder: Path) -> str:
    """The folder's plots, embedded as PNG data URIs.

    Args:
        folder: a result folder.

    Returns:
        The HTML; empty where the folder has no plot.
    """
    figures = []
    for name in [*PLOTS, *sorted(p.name for p in folder.glob("*.png") if p.name not in PLOTS)]:
        path = folder / name
        if path.is_file():
            data = base64.b64encode(path.read_bytes()).decode()
            figures.append(f"<figure><img alt='{_e(name)}' src='data:image/png;base64,{data}'>"
                           f"<figcaption><code>{_e(name)}</code>: {_e(PLOTS.get(name, ''))}</figcaption></figure>")
    return "<h3>Plots</h3>" + "".join(figures) if figures else ""


def localize_section(results: dict[str, Any]) -> str:
    """A localization (``localize.json``): where the followed training runs part from float64 (``--follow``), then
    the step compared, its findings and its table with the rows past the bound highlighted.

    Args:
        results: a localization's results (:mod:`toolkit.command.localize`), with ``config``.

    Returns:
        The HTML.
    """
    from toolkit.command.localize import REFERENCE_DTYPE, findings, first_parting

    config, bound = results["config"], results["bound"]
    backends, dtype = config["backends"], config["dtype"]
    parts = [f"<h3>Where the numbers part: {_e(config['model'])}, {_e(dtype)} against {REFERENCE_DTYPE} on "
             f"{_e(backends[0])}</h3><p>batch {_e(config['batch'])}, seed {_e(config['seed'])}; relative error: "
             f"max |value - reference| over the quantity's largest |reference|; bound {bound:g}.</p>"]
    trajectories = results.get("trajectories") or []
    if trajectories:
        rows = [[run["backend"], ", ".join(run["first_parted"][:3]) or "-", run["split_step"] or "never",
                 f"{run['max_rel_param_diff'][-1]:.1e}"] for run in trajectories]
        first = first_parting(trajectories)
        parts.append(f"<h4>{_e(config['steps'])} training steps in {_e(dtype)} beside {REFERENCE_DTYPE} "
                     f"({_e(config['optimizer'])}({_e(config['lr'])}))</h4>"
                     + _table(["backend", "first parameters past the bound", "parts at step",
                               "divergence at the end"], rows, 2, [run["split_step"] is not None
                                                                    for run in trajectories])
                     + "<p class=note>divergence: the largest over parameters of max |a - b| over the largest "
                       "|parameter|, after every step.</p>"
                     + (f"<p><b>First layer past {bound:g}: <code>{_e(first['layer'])}</code> (step {first['step']}, "
                        f"on {_e(' and '.join(first['backends']))})</b></p>" if first else ""))
    rows, marked = [], []
    for row in results["rows"]:
        rows.append([row["kind"], row["name"], "x".join(map(str, row["shape"])) or "()", f"{row['scale']:.2g}",
                     *(f"{row['error'][b]:.1e}" for b in backends), f"{max(row['float64_error'].values()):.0e}",
                     "unresolved" if row["unresolved"] else row["farther"] or ""])
        marked.append(not row["unresolved"] and max(row["error"].values()) > bound)
    lines = findings(results)
    parts.append(f"<h4>One step (step {_e(config['steps'] + 1)}) from the {REFERENCE_DTYPE} parameters</h4>"
                 "<ul class=findings>" + "".join(f"<li>{_e(line.strip())}</li>" for line in lines) + "</ul>"
                 + _table(["kind", "name", "shape", "scale", *(f"{b} {dtype}" for b in backends),
                           f"{REFERENCE_DTYPE} (max)", "farther"], rows, 2, marked, last_text=True)
                 + f"<p class=note>in the order a step computes them: recorded outputs, the output and the loss, "
                   f"then gradients in backpropagation order; highlighted: past {bound:g}; unresolved: zero in exact "
                   f"arithmetic (its reference is rounding noise), not judged.</p>")
    return "".join(parts)


def timing_section(results: dict[str, Any]) -> str:
    """A timing (``timing.json``, ``multigpu time``): each backend and device count in its own process, and the
    ratios between backends.

    Args:
        results: :func:`toolkit.command.timing.run_timing`'s results.

    Returns:
        The HTML.
    """
    config = results["config"]
    rows = [[run["backend"], run["devices"], run["error"], "", "", ""] if "error" in run else
            [run["backend"], run["devices"], f"{run['startup_s']:.1f} s", f"{run['first_step_s']:.2f} s",
             f"{run['median_ms']:.2f} ms ({run['low_ms']:.2f}-{run['high_ms']:.2f})", f"{run['peak_rss_mb']:.0f} MB"]
            for run in results["runs"]]
    ratios = [[r["devices"], f"{r['backend']} / {r['over']}", f"{r['ratio']:.2f}", f"{r['low']:.2f}-{r['high']:.2f}"]
              for r in results["ratios"]]
    return (f"<h3>Timing, each run in its own process: {_e(config['model'])}</h3><p>{_e(config['optimizer'])}"
            f"({_e(config['lr'])}), {_e(config['dtype'])}, batch {_e(config['batch'])}; {_e(config['rounds'])} rounds "
            f"of {_e(config['steps'])} steps.</p>"
            + _table(["backend", "devices", "start-up", "first step", "median step (95% interval)", "peak RSS"],
                     rows, 1)
            + (_table(["devices", "ratio of median steps", "ratio", "95% interval"], ratios, 2) if ratios else "")
            + "<p class=note>start-up: from starting the process to the backend ready on its devices (interpreter, "
              "imports), apart from the first step (tracing or compiling); peak RSS: each process's own.</p>"
            + (f"<p class=note>{_e(note)}.</p>" if (note := busy_note(results["runs"])) else ""))


def folder_section(folder: Path, index: int) -> str:
    """Everything the report says of one result folder.

    Args:
        folder: a folder written by ``multigpu compare``, ``localize`` or ``time`` (``--out``).
        index: its number in the report (for the links).

    Returns:
        The HTML.

    Raises:
        ArgumentError: the folder holds no ``results.json``, ``localize.json`` or ``timing.json``, or one of them
            is not readable JSON.
    """
    compared, localized, timed = folder / "results.json", folder / "localize.json", folder / "timing.json"
    if not any(path.is_file() for path in (compared, localized, timed)):
        raise ArgumentError(f"{folder}: no results.json, localize.json or timing.json (written by multigpu compare, "
                            f"localize or time --out {folder})")
    parts = [f"<h2 id=r{index}>{_e(folder)}</h2>"]
    if compared.is_file():
        results = _read(compared)
        parts += [f"<p>{_setup(results['config'], _seeds(results))}</p>", runs_section(results),
                  statistics_section(results), pairs_section(results), plots_section(folder)]
    if localized.is_file():
        parts.append(localize_section(_read(localized)))
    if timed.is_file():
        parts.append(timing_section(_read(timed)))
    return "".join(parts)


def expand(folders: Sequence[Path]) -> list[Path]:
    """The result folders to report: each folder given, or for a sweep's folder (``sweep.csv``, written by
    ``multigpu compare`` with list-valued options) the folders of its combinations, in the sweep's order.

    Args:
        folders: the folders given.

    Returns:
        The folders, each with a ``results.json`` or ``localize.json`` (or, left to :func:`folder_section` to
        refuse, neither).
    """
    out = []
    for folder in map(Path, folders):
        if (folder / "sweep.csv").is_file() and not (folder / "results.json").is_file():
            with (folder / "sweep.csv").open() as handle:
                out += list(dict.fromkeys(folder / row["folder"] for row in csv.DictReader(handle)))
        else:
            out.append(folder)
    return out


def sweep_section(folder: Path) -> str:
    """A sweep's table (``sweep.csv``): one row per combination of its options, backend and device count.

    Args:
        folder: the sweep's folder.

    Returns:
        The HTML.
    """
    with (folder / "sweep.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    columns = list(rows[0]) if rows else []

    def shown(value: str) -> str:
        try:
            return f"{float(value):.4g}" if value and not value.isdigit() else value or "-"
        except ValueError:
            return value
    return (f"<h2>Sweep {_e(folder)}</h2><p>One comparison per combination; its folder is reported below.</p>"
            + _table(columns, [[shown(row[c]) for c in columns] for row in rows], 1)
            + f"<p class=note>{_e(SWEEP_NOTE)}.</p>")


def _read(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ArgumentError(f"{path}: cannot read it as JSON ({error})") from error


def build_report(folders: Sequence[Path], title: str = "multigpu comparison report") -> str:
    """The HTML of a report of ``folders``, self-contained (styles inline, plots as data URIs).

    Args:
        folders: result folders, in the order shown.
        title: the page's title.

    Returns:
        The HTML document.

    Raises:
        ArgumentError: no folders, or a folder :func:`folder_section` refuses.
    """

    if not folders:
        raise ArgumentError("expected at least one result folder")
    folders, sweeps = expand(folders), [Path(f) for f in folders if (Path(f) / "sweep.csv").is_file()]
    sections = [sweep_section(folder) for folder in sweeps]
    sections += [folder_section(Path(folder), i) for i, folder in enumerate(folders)]
    contents = "".join(f"<li><a href='#r{i}'>{_e(folder)}</a></li>" for i, folder in enumerate(folders))
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{_e(title)}</title>"
            f"<meta name=viewport content='width=device-width, initial-scale=1'><style>{_STYLE}</style></head>"
            f"<body><h1>{_e(title)}</h1><p class=note>multigpu-toolkit {_e(__version__)}; "
            f"{len(folders)} result folder(s)</p>"
            + (f"<nav><ul>{contents}</ul></nav>" if len(folders) > 1 else "") + "".join(sections) + "</body></html>")


def write_report(folders: Sequence[Path], out: Path, title: str = "multigpu comparison report") -> Path:
    """Write :func:`build_report` of ``folders`` to ``out``.

    Args:
        folders: result folders.
        out: the HTML file written.
        title: the page's title.

    Returns:
        ``out``.
    """
    document = build_report(folders, title)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(document, encoding="utf-8")
    return out
