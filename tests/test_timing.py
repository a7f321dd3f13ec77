"""``multigpu time`` (issue 33 item 5): each backend and device count timed in its own fresh process."""

from __future__ import annotations

import json

import numpy as np

from toolkit.command.main import main
from toolkit.command.timing import busy_note, median_interval


def test_a_run_timed_on_a_busier_machine_than_its_cores_is_flagged():
    quiet, busy = {"load": 1.5, "cores": 2}, {"load": 9.6, "cores": 2}
    assert busy_note([quiet]) is None and busy_note([{"median_ms": 1.0}]) is None  # older results: no load
    assert "load average up to 9.6 on 2 cores" in busy_note([quiet, busy]) and "1 of 2 runs" in busy_note([quiet, busy])


def test_the_median_interval_holds_the_median_and_narrows_with_agreeing_rounds():
    spread = median_interval([*range(1, 10), 100.0])
    assert spread[0] <= 5.5 <= spread[1] and spread[1] < 10.0  # the median resists the outlier
    assert median_interval([2.0] * 5) == (2.0, 2.0)


def test_time_runs_each_backend_in_its_own_process(tmp_path, capsys, backend_name):
    argv = ["time", "--backends", backend_name, "--model", "polynomial", "--devices", "1", "--rounds", "2",
            "--steps", "2", "--batch", "16", "--out", str(tmp_path), "--quiet"]
    assert main(argv) == 0, capsys.readouterr()
    (run,) = json.loads((tmp_path / "timing.json").read_text())["runs"]
    assert "error" not in run, run["error"]
    assert run["backend"] == backend_name and len(run["rounds_ms"]) == 2
    assert run["startup_s"] > 0 and run["first_step_s"] > 0 and run["peak_rss_mb"] > 0
    assert run["load"] >= 0 and run["cores"] >= 1
    assert run["low_ms"] <= run["median_ms"] == np.median(run["rounds_ms"]) <= run["high_ms"]
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "timing.html")]) == 0
    assert "Timing, each run in its own process: polynomial" in (tmp_path / "timing.html").read_text()
