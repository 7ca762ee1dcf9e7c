"""`onlinegp bench vips-synthetic`: Pescador-Barrios et al. 2024, Figs. 1 and 2a on tiny settings."""

import csv

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from onlinegp.data import batch_indices, load_dataset, synthetic_function
from onlinegp.experiments.bench.runner import RunnerOptions
from onlinegp.experiments.bench.vips import (
    BENCHES,
    SyntheticOptions,
    fig2a_dataset,
    synthetic_kernel,
    synthetic_stream,
    synthetic_test_grid,
)
from onlinegp.experiments.cli import app


def test_fig2a_dataset_follows_section_5_2():
    data = fig2a_dataset(seed=3)
    assert len(data) == 1000 and data.meta["noise_std"] == 0.3
    batches = [data.X[b, 0] for b in batch_indices(data)]
    assert [len(b) for b in batches] == [250] * 4  # four equal batches
    assert all(batches[i].max() <= batches[i + 1].min() for i in range(3))  # sorted: a growing domain
    assert 0 <= data.X.min() and data.X.max() <= 10
    residual = data.y - synthetic_function(data.X[:, 0])
    assert 0.25 < residual.std() < 0.35  # f(x) = sin(2x) + cos(5x) plus σ = 0.3 noise
    x, y = synthetic_test_grid(seed=3)
    assert x.shape == (500, 1) and x[0, 0] == 0 and x[-1, 0] == 10  # appendix F.2.1: a 500-point test grid
    assert not np.allclose(y, synthetic_function(x[:, 0]))
    with pytest.raises(ValueError, match="batches"):
        fig2a_dataset(size=3, batches=4)


def test_synthetic_kernel_has_the_appendix_initial_values():
    kernel = synthetic_kernel(1.5)
    assert float(kernel.outputscale.detach()) == pytest.approx(1.5)
    assert float(kernel.base_kernel.lengthscale.detach()) == pytest.approx(
        0.5 / 5
    )  # 0.5 in data units, [0, 10] -> [-1, 1]
    assert kernel.outputscale.dtype == torch.float64


def test_vips_size_follows_the_data():
    sizes = {
        name: [r["num_inducing"] for r in synthetic_stream(load_dataset(name, seed=0), "vips", 0, 1.0, num_steps=5)]
        for name in ("synthetic1", "synthetic3")
    }
    # VIPS keeps the old inducing inputs, so M never shrinks
    assert all(np.all(np.diff(m) >= 0) for m in sizes.values())
    # an expanding domain keeps growing; data confined to [4, 6] stays small until the outliers come
    assert sizes["synthetic1"][-1] >= 3 * sizes["synthetic1"][0]
    assert sizes["synthetic3"][4] <= sizes["synthetic3"][0] + 3
    assert sizes["synthetic3"][-1] >= 2 * sizes["synthetic3"][4]


def test_fixed_size_runs_never_exceed_m_and_reach_it():
    data = fig2a_dataset(seed=0, size=200, batches=4)
    for m in (5, 10):
        rows = synthetic_stream(data, f"fixed-{m}", 0, 1.5, num_steps=3)
        assert [r["num_inducing"] for r in rows][-1] == m
        assert all(r["num_inducing"] <= m for r in rows)
    with pytest.raises(ValueError, match="fixed-M"):
        synthetic_stream(data, "fixed-0", 0, 1.5)


def test_run_synthetic_writes_csv_figures_and_table(tmp_path):
    options = SyntheticOptions(seeds=[0, 1], datasets=["synthetic2"], fixed=[5], fig2a_size=120, num_steps=3)
    table = BENCHES["vips-synthetic"].start(options, tmp_path, RunnerOptions(quiet=True))
    with open(tmp_path / "synthetic.csv") as f:
        rows = list(csv.DictReader(f))
    expected = {"dataset", "method", "seed", "batch", "num_data", "num_inducing", "rmse", "nlpd", "update_time"}
    assert set(rows[0]) == expected
    # synthetic2: 10 batches of VIPS; Fig. 2a: 4 batches of M = 5, VIPS and the exact GP; two seeds each
    assert len(rows) == 2 * (10 + 3 * 4)
    assert {(r["dataset"], r["method"]) for r in rows} == {
        ("synthetic2", "vips"),
        ("fig2a", "fixed-5"),
        ("fig2a", "vips"),
        ("fig2a", "exact"),
    }
    assert all(np.isfinite(float(r["rmse"])) and np.isfinite(float(r["nlpd"])) for r in rows)
    for name in ("fig1.png", "fig2a.png", "table.md"):
        assert (tmp_path / name).stat().st_size > 0
    assert "Fig. 1" in table and "Fig. 2a" in table and "M = 5" in table
    with pytest.raises(ValueError, match="unknown Fig. 1 datasets"):
        BENCHES["vips-synthetic"].start(SyntheticOptions(seeds=[0], datasets=["concrete"]), tmp_path)


def test_cli_runs_fig1_only(tmp_path):
    out = tmp_path / "cli"
    args = ["bench", "vips-synthetic", "--seeds", "0", "--datasets", "synthetic2", "--no-fig2a", "--num-steps", "3"]
    res = CliRunner().invoke(app, [*args, "--out", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    assert (out / "fig1.png").is_file() and not (out / "fig2a.png").exists()
    bad = CliRunner().invoke(app, ["bench", "vips-synthetic", "--datasets", "nope", "--out", str(out), "--quiet"])
    assert bad.exit_code != 0 and "unknown Fig. 1 datasets" in bad.output
