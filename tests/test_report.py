"""Results a researcher keeps (issue 33 item 6): the tidy CSV files, the TensorBoard event writer and the HTML report,
on synthetic results (no framework); the event files read back by TensorFlow's own reader where it is installed.
The real command writes them in tests/test_compare_stats.py."""

from __future__ import annotations

import csv
import json
import struct

import pytest

from toolkit.command.compare import _with_summaries
from toolkit.command.divergence import pair_record
from toolkit.command.events import crc32c, event, tf_record, write_events, write_tensorboard
from toolkit.command.main import main
from toolkit.command.report import build_report
from toolkit.command.tidy import write_csv

CONFIG = {"model": "digits-mlp", "backends": ["tf", "ae"], "devices": [1], "dtype": "float32", "optimizer": "adam",
          "lr": 0.01, "eps": 1e-7, "steps": 3, "batch": 16, "seed": 0, "seeds": [0, 1], "split_bound": 1e-4,
          "perturb": None}


def _results() -> dict:
    """Two backends on one device over two seeds, three steps; the pair of seed 1 parts at step 2."""
    runs, pairs = [], []
    for seed in (0, 1):
        for backend, shift in (("tf", 0.0), ("ae", 1e-3)):
            runs.append({"backend": backend, "devices": 1, "seed": seed,
                         "seeds": {"init": seed, "data": seed, "noise": seed},
                         "losses": [2.0 - seed, 1.5 + shift, 1.0 + shift], "step_times_ms": [900.0, 2.0, 3.0],
                         "first_step_ms": 900.0, "median_ms": 2.5, "p10_ms": 2.0, "p90_ms": 3.0,
                         "peak_rss_mb": 800.0, "accuracy": 0.9 + shift})
        per_step = [{"w": 1e-6}, {"w": 1e-6 if seed == 0 else 2e-4}, {"w": 1e-6 if seed == 0 else 3e-4}]
        pairs.append({**pair_record(("tf", 1), ("ae", 1), per_step), "seed": seed})
    results = _with_summaries({"runs": runs, "divergence": [], "within": [], "pairs": pairs, "split_bound": 1e-4})
    return {**results, "config": CONFIG}


def test_the_csv_files_are_tidy_one_row_per_observation(tmp_path):
    written = write_csv(_results(), tmp_path)
    assert [p.name for p in written] == ["runs.csv", "steps.csv", "pairs.csv"]
    runs, steps, pairs = (list(csv.DictReader(p.open())) for p in written)
    assert len(runs) == 4 and runs[1] == {
        "model": "digits-mlp", "dtype": "float32", "optimizer": "adam", "lr": "0.01", "eps": "1e-07", "batch": "16",
        "split_bound": "0.0001", "perturb": "", "backend": "ae", "devices": "1", "seed": "0", "init_seed": "0",
        "data_seed": "0", "noise_seed": "0",
        "steps": "3", "final_loss": "1.001", "accuracy": "0.901", "first_step_ms": "900.0", "median_ms": "2.5",
        "p10_ms": "2.0", "p90_ms": "3.0", "peak_rss_mb": "800.0"}
    assert [(r["backend"], r["seed"], r["step"], r["loss"]) for r in steps[:3]] == [
        ("tf", "0", "1", "2.0"), ("tf", "0", "2", "1.5"), ("tf", "0", "3", "1.0")]
    assert [(r["seed"], r["step"], r["parted"]) for r in pairs] == [
        ("0", "1", "False"), ("0", "2", "False"), ("0", "3", "False"),
        ("1", "1", "False"), ("1", "2", "True"), ("1", "3", "True")]


def _records(data: bytes) -> list[bytes]:
    """The records of a TFRecord file, each checked against its masked CRCs."""
    def masked(payload: bytes) -> int:
        crc = crc32c(payload)
        return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    out, at = [], 0
    while at < len(data):
        (length,), (length_crc,) = struct.unpack_from("<Q", data, at), struct.unpack_from("<I", data, at + 8)
        assert length_crc == masked(data[at:at + 8])
        payload = data[at + 12:at + 12 + length]
        assert struct.unpack_from("<I", data, at + 12 + length)[0] == masked(payload)
        out.append(payload)
        at += 16 + length
    return out


def test_event_files_are_framed_tf_records_of_event_messages(tmp_path):
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert tf_record(b"") == struct.pack("<Q", 0) + tf_record(b"")[8:]
    # A hand-decoded Event: wall_time (field 1, double), step (field 2, varint), summary (field 5) with one value:
    # tag (field 1) and simple_value (field 2, float32).
    assert event(1.5, 3, {"loss": 0.25}) == (b"\x09" + struct.pack("<d", 1.5) + b"\x10\x03" + b"\x2a\x0d"
                                            + b"\x0a\x0b" + b"\x0a\x04loss" + b"\x15" + struct.pack("<f", 0.25))
    written = write_tensorboard(_results(), tmp_path)
    assert sorted(p.parent.name for p in written) == ["ae-x1-seed0", "ae-x1-seed1", "tf-x1-seed0", "tf-x1-seed1"]
    records = _records(next(p for p in written if p.parent.name == "tf-x1-seed1").read_bytes())
    assert len(records) == 4 and b"brain.Event:2" in records[0]  # the version, then one event per step
    assert b"max_rel_param_diff/ae-x1" in records[2] and struct.pack("<f", 2e-4) in records[2]


def test_tensorflow_reads_the_event_files_back(tmp_path):
    tf = pytest.importorskip("tensorflow")
    path = write_events(tmp_path / "run", [(1, {"loss": 2.5, "step_time_ms": 1.25}), (2, {"loss": -0.5})])
    events = list(tf.compat.v1.train.summary_iterator(str(path)))
    assert events[0].file_version == "brain.Event:2"
    assert [(e.step, [(v.tag, v.simple_value) for v in e.summary.value]) for e in events[1:]] == [
        (1, [("loss", 2.5), ("step_time_ms", 1.25)]), (2, [("loss", -0.5)])]


def _localization() -> dict:
    row = {"kind": "output", "name": "relu0", "shape": [16, 8], "scale": 2.0, "error": {"tf": 1e-7, "ae": 3e-3},
           "float64_error": {"tf": 0.0, "ae": 1e-16}, "unresolved": False, "farther": "ae"}
    return {"config": {"model": "m", "backends": ["tf", "ae"], "dtype": "float32", "batch": 16, "steps": 2,
                       "optimizer": "adam", "lr": 0.01, "seed": 0, "follow": True},
            "rows": [row], "bound": 1e-4, "first_past": row, "first_past_by_backend": {"tf": None, "ae": "relu0"},
            "worst": row, "farther_counts": {"output": {"tf": 0, "ae": 1}, "loss": {}, "gradient": {}},
            "trajectories": [{"backend": b, "max_rel_param_diff": [1e-6, 2e-4], "split_step": 2,
                              "first_parted": ["d1/kernel"], "param_split_steps": {"d1/kernel": 2}}
                             for b in ("tf", "ae")]}


def test_the_report_holds_every_section_of_every_folder_and_refuses_an_empty_one(tmp_path, capsys):
    compared, localized = tmp_path / "compared", tmp_path / "localized"
    compared.mkdir()
    localized.mkdir()
    (compared / "results.json").write_text(json.dumps(_results()))
    (compared / "loss.png").write_bytes(b"\x89PNG\r\n\x1a\n-not-a-real-image")
    (localized / "localize.json").write_text(json.dumps(_localization()))
    page = build_report([compared, localized])
    assert page.startswith("<!doctype html>") and page.count("<h2 id=") == 2
    for words in ("final loss", "The gap against the seed spread", "Where runs part", "data:image/png;base64,",
                  "First layer past 0.0001: <code>d1</code> (step 2, on tf and ae)",
                  "first past 0.0001: output relu0 (tf 1.0e-07, ae 3.0e-03; ae farther)", "<tr class=past>"):
        assert words in page, words
    assert "PERTURBED" not in page and "first in" in page
    assert main(["report", str(compared), str(tmp_path), "--out", str(tmp_path / "r.html")]) == 2
    assert "no results.json, localize.json or timing.json" in capsys.readouterr().err
    (compared / "results.json").write_text(json.dumps({**_results(), "config": {**CONFIG, "perturb": "ae:1e-3"}}))
    assert "PERTURBED (--perturb ae:1e-3)" in build_report([compared])
