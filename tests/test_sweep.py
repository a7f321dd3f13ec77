"""Sweeps in one ``multigpu compare`` (issue 33 item 5): list-valued --batch, --dtype, --lr and --eps, every
combination its own comparison, one table and sweep.csv."""

from __future__ import annotations

import csv
import json

import pytest

from toolkit.command.compare import make_optimizer
from toolkit.command.main import main
from toolkit.command.sweep import combinations, label, parse_list, sweep_row
from toolkit.errors import ArgumentError


def test_lists_and_combinations():
    assert parse_list("0.01, 0.001", float) == [0.01, 0.001] and parse_list("32", int) == [32]
    for text, words in (("1,1", "distinct"), ("", "distinct"), ("1,x", "could not convert")):
        with pytest.raises(ArgumentError, match=words):
            parse_list(text, float)
    combos = combinations({"batch": [32, 64], "dtype": ["float32"], "lr": [0.1], "eps": [None, 1e-3]})
    assert combos == [{"batch": 32, "dtype": "float32", "lr": 0.1, "eps": None},
                      {"batch": 32, "dtype": "float32", "lr": 0.1, "eps": 1e-3},
                      {"batch": 64, "dtype": "float32", "lr": 0.1, "eps": None},
                      {"batch": 64, "dtype": "float32", "lr": 0.1, "eps": 1e-3}]
    assert [label(c) for c in combos[:2]] == ["batch32-float32-lr0.1", "batch32-float32-lr0.1-eps0.001"]
    assert make_optimizer("adam", 0.1, 1e-3).eps == 1e-3 and make_optimizer("rmsprop", 0.1).eps == 1e-7
    with pytest.raises(ArgumentError, match="--optimizer sgd, which has no eps"):
        make_optimizer("sgd", 0.1, 1e-3)


def test_a_sweep_row_holds_the_losses_and_the_pairs_by_kind():
    results = {"config": {"backends": ["a", "b"]},
               "runs": [{"backend": "a", "losses": [2.0, 1.0], "accuracy": 0.5},
                        {"backend": "a", "losses": [2.0, 3.0], "accuracy": 0.7},
                        {"backend": "b", "losses": [2.0, 1.5], "accuracy": None}],
               "kind_summary": [{"kind": "order", "parted": 1, "pairs": 4, "final_median": 2e-5}]}
    row = sweep_row({"batch": 8, "dtype": "float32", "lr": 0.1, "eps": None}, results)
    assert row == {"folder": "batch8-float32-lr0.1", "batch": 8, "dtype": "float32", "lr": 0.1, "eps": None,
                   "a final loss": 2.0, "a accuracy": 0.6, "b final loss": 1.5, "b accuracy": None,
                   "framework pairs parted": None, "framework divergence": None, "order pairs parted": "1/4",
                   "order divergence": 2e-5}


def test_an_eps_for_sgd_is_refused_before_anything_trains(tmp_path, capsys):
    assert main(["compare", "--optimizer", "sgd", "--eps", "1e-3", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--eps 0.001 given for --optimizer sgd" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit) as stopped:  # argparse's own exit, status 2
        main(["compare", "--dtype", "float32,float16", "--out", str(tmp_path)])
    assert stopped.value.code == 2 and "expected float32 or float64, got 'float16'" in capsys.readouterr().err


def test_compare_sweeps_every_combination_into_its_own_folder_and_one_table(tmp_path, capsys, backend_name):
    argv = ["compare", "--backends", backend_name, "--model", "polynomial", "--devices", "1", "--steps", "2",
            "--batch", "16", "--eps", "1e-7,0.1", "--lr", "0.05", "--out", str(tmp_path), "--json"]
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out.splitlines()[0])
    assert [row["folder"] for row in rows] == ["batch16-float32-lr0.05-eps1e-07", "batch16-float32-lr0.05-eps0.1"]
    for row in rows:
        results = json.loads((tmp_path / row["folder"] / "results.json").read_text())
        assert results["config"]["eps"] == row["eps"] and results["runs"][0]["losses"][-1] == pytest.approx(
            row[f"{backend_name} final loss"])
    losses = [row[f"{backend_name} final loss"] for row in rows]
    assert losses[0] != losses[1]  # eps reached the optimizer
    with (tmp_path / "sweep.csv").open() as handle:
        assert [r["eps"] for r in csv.DictReader(handle)] == ["1e-07", "0.1"]
    # The report of the sweep's folder: its table, then each combination's comparison, in the sweep's order.
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "sweep.html")]) == 0
    page = (tmp_path / "sweep.html").read_text()
    assert f"<h2>Sweep {tmp_path}</h2>" in page
    first, second = (f"<h2 id=r{i}>{tmp_path / row['folder']}</h2>" for i, row in enumerate(rows))
    assert page.index(first) < page.index(second)
