"""Smoke runs of the WISKI benches (paper 002 §5) at toy sizes: they run end to end and write their outputs."""

import json

import pytest

from onlinegp.bench.wiski import _wiski_options, run_banana, run_bo, run_uci


def test_uci_stream_writes_metrics(tmp_path):
    rows = run_uci(
        tmp_path,
        datasets=["skillcraft"],
        models=["wiski", "exact", "not-a-model"],
        all_input_models=["osgpr"],
        max_points=6,
        eval_every=3,
        max_test=50,
        pretrain_steps=2,
        quiet=True,
        log=lambda s: None,
    )
    assert {(r["inputs"], r["model"]) for r in rows} == {
        ("shared", "wiski"),
        ("shared", "exact"),
        ("all", "osgpr (all inputs)"),
    }
    assert [r["num_data"] for r in rows if r["model"] == "wiski"] == [151, 154, 157]
    assert all(r["rmse"] > 0 and r["update_time"] > 0 for r in rows)
    for name in ("config.json", "metrics.csv", "metrics.json", "uci.png"):
        assert (tmp_path / name).is_file()
    assert json.loads((tmp_path / "metrics.json").read_text()) == rows


def test_banana_stream(tmp_path):
    rows = run_banana(
        tmp_path,
        pretrain_steps=2,
        hindsight_steps=2,
        eval_every=5,
        max_test=100,
        grid_size=8,
        max_points=5,
        quiet=True,
        log=lambda s: None,
    )
    online = [r for r in rows if r["model"] == "wiski"]
    assert [r["num_data"] for r in online] == [20, 25]
    assert all(0 <= r["accuracy"] <= 1 for r in rows) and (tmp_path / "banana.png").is_file()


@pytest.mark.slow
def test_bo_loop(tmp_path):
    rows = run_bo(
        tmp_path,
        functions=["ackley"],
        iterations=2,
        init_steps=2,
        steps=1,
        grid_size=5,
        num_restarts=1,
        raw_samples=8,
        mc_samples=16,
        quiet=True,
        log=lambda s: None,
    )
    assert [r["num_data"] for r in rows if r["model"] == "wiski"] == [8, 11]
    assert all(r["best"] <= 0 for r in rows) and (tmp_path / "bo.png").is_file()


def test_table_c1_rates_per_dataset():
    """Stanton et al. 2021, Table C.1: elevators and protein learn slower than skillcraft; unlisted sets take its row."""
    sk, el = _wiski_options("skillcraft", 200), _wiski_options("elevators", 200)
    assert (sk["pretrain_lr"], sk["pretrain_lr_projection"], sk["lr"], sk["lr_projection"]) == (5e-2, 5e-3, 5e-3, 5e-4)
    assert (el["pretrain_lr"], el["pretrain_lr_projection"], el["lr"], el["lr_projection"]) == (1e-2, 1e-3, 1e-3, 1e-4)
    assert _wiski_options("kin40k", 7) == {**sk, "pretrain_steps": 7} and sk["grid_size"] == 16
