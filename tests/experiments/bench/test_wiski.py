"""Smoke runs of the WISKI benches (paper 002 §5) at toy sizes: they run end to end and write their outputs."""

import json

import pytest
import torch
import typer
from typer.testing import CliRunner

from onlinegp.experiments.bench.runner import RunnerOptions
from onlinegp.experiments.bench.wiski import (
    BENCHES,
    BoOptions,
    UciOptions,
    _wiski_options,
    hindsight_exact,
)
from onlinegp.experiments.cli import app
from onlinegp.experiments.protocols import BO_FUNCTIONS, authors_bo_kernel, lbfgs_exact_gp
from onlinegp.models import make_model
from onlinegp.models.registry import make_recorded_model


def _start(name, out, log=lambda s: None, **options):
    """Bench ``name`` with its options, quietly, into ``out``."""
    bench = BENCHES[name]
    return bench.start(bench.options(**options), out, RunnerOptions(quiet=True), log)


def run_banana(out, **options):
    return _start("wiski-banana", out, **options)


def run_bo(out, **options):
    return _start("wiski-bo", out, **options)


def run_rank_ablation(out, **options):
    return _start("wiski-rank", out, **options)


UCI_SMOKE = dict(
    datasets=["skillcraft"],
    models=["wiski", "exact"],
    all_input_models=["osgpr"],
    max_points=6,
    eval_every=3,
    max_test=50,
    pretrain_steps=2,
)


def test_uci_stream_is_a_sweep_of_one_run_per_model_kept_and_restored(tmp_path):
    results = tmp_path / "results"
    bench = BENCHES["wiski-uci"]
    runner = RunnerOptions(quiet=True, results=results)
    rows = bench.start(bench.options(**UCI_SMOKE), tmp_path / "out", runner, lambda s: None)
    assert {(r["inputs"], r["model"]) for r in rows} == {
        ("shared", "wiski"),
        ("shared", "exact"),
        ("shared", "exact GP (batch)"),
        ("all", "osgpr (all inputs)"),
    }
    assert [r["num_data"] for r in rows if r["model"] == "wiski"] == [151, 154, 157]
    # the hindsight reference: a curve at the streams' evaluation points, on the shared features only
    assert [r["num_data"] for r in rows if r["model"] == "exact GP (batch)"] == [151, 154, 157]
    assert all(r["rmse"] > 0 and r["update_time"] > 0 for r in rows)
    for name in ("config.json", "metrics.csv", "metrics.json", "uci.png", "table.md"):
        assert (tmp_path / "out" / name).is_file()
    assert json.loads((tmp_path / "out" / "metrics.json").read_text()) == rows
    # each run records the model it ran: the options asked of the instance
    record = json.loads((tmp_path / "out" / "skillcraft/shared/wiski/seed0/model.json").read_text())
    assert record["class"] == "WISKI" and record["options"]["grid_size"] == 16
    kept = sorted(p.parent.name for p in (results / "wiski-uci").glob("*/DONE.json"))
    assert len(kept) == 4
    # a rerun elsewhere restores every run from the results tree, to the same rows
    again = bench.start(bench.options(**UCI_SMOKE), tmp_path / "again", runner, lambda s: None)
    assert again == rows


def test_uci_runs_of_a_dataset_see_the_same_learnt_features():
    """Every run learns the shared projection again, seeded: the same features bit for bit in every run of a dataset
    and seed (what makes the models' comparison one of approximations), other features for another seed."""
    from onlinegp.experiments.bench.wiski import shared_projection, uci_stream

    X, y, _, _, bounds, n0 = uci_stream("skillcraft", 0)
    stats = (float(y.mean()), float(y.std()))
    h1, h2, h3 = (shared_projection("skillcraft", X[:n0], y[:n0], bounds, stats, 2, seed) for seed in (0, 0, 1))
    assert torch.equal(h1(X), h2(X))
    assert not torch.equal(h1(X), h3(X))
    assert h1(X).shape == (len(X), 2) and h1(X).abs().max() <= 1


def test_uci_rejects_unknown_models_and_skips_the_exact_gp_on_long_streams():
    from onlinegp.experiments.bench.wiski import uci_specs

    with pytest.raises(ValueError, match=r"unknown models \['not-a-model'\]"):
        uci_specs(UciOptions(**(UCI_SMOKE | {"models": ["wiski", "not-a-model"]})))
    specs = uci_specs(UciOptions(**(UCI_SMOKE | {"max_points": 200, "exact_max": 300, "batch_exact_max": 300})))
    assert [s.run_id.split("/")[2] for s in specs] == ["wiski", "osgpr"]  # 151 + 200 points > 300
    assert len(uci_specs(UciOptions(**(UCI_SMOKE | {"seeds": [0, 1]})))) == 8


def test_rank_ablation_runs_the_papers_ranks_and_a_full_root_equals_wtw_whole(tmp_path):
    table = run_rank_ablation(
        tmp_path,
        grid_sizes=[16],
        updates=["gill", "truncate"],
        max_points=4,
        eval_every=2,
        pretrain_steps=1,
    )
    finals = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) == 5 and cells[0] == "256":
            finals[cells[1]] = cells[3]
    # the truncating root at r = m is WᵀW whole: not run
    assert list(finals) == ["whole", "r128-gill", "r128-truncate", "r192-gill", "r192-truncate", "r256-gill"]
    assert finals["r256-gill"] == finals["whole"]  # r = m: exact to the jitter, the same stream to 3 digits
    rows = json.loads((tmp_path / "m256" / "r128-truncate" / "seed0" / "metrics.json").read_text())
    assert [r["num_data"] for r in rows] == [151, 153, 155]
    with pytest.raises(ValueError, match="grid size 8"):
        run_rank_ablation(tmp_path, grid_sizes=[8])


def test_rank_ablation_runs_the_ranks_asked_for_beside_wtw_whole():
    from onlinegp.experiments.bench.wiski import RankOptions, rank_specs

    specs = rank_specs(RankOptions(grid_sizes=[32], updates=["gill"], ranks=[256, 512], seeds=[0, 1]))
    assert [s.run_id for s in specs] == [
        f"m1024/{v}/seed{k}" for v in ("whole", "r256-gill", "r512-gill") for k in (0, 1)
    ]
    # the runs' configs (their keys in the results tree) are those of the whole table's
    whole_table = {s.run_id: s.config for s in rank_specs(RankOptions(grid_sizes=[32], updates=["gill"], seeds=[0, 1]))}
    assert all(whole_table[s.run_id] == s.config for s in specs)
    with pytest.raises(ValueError, match=r"ranks \[128\]"):
        rank_specs(RankOptions(grid_sizes=[32], ranks=[128]))


def test_banana_stream(tmp_path):
    rows = run_banana(
        tmp_path,
        pretrain_steps=2,
        hindsight_steps=2,
        eval_every=5,
        max_test=100,
        grid_size=8,
        max_points=5,
        log=lambda s: None,
    )
    online = [r for r in rows if r["model"] == "wiski"]
    assert [r["num_data"] for r in online] == [20, 25]
    assert all(0 <= r["accuracy"] <= 1 for r in rows) and (tmp_path / "banana.png").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("fit", ["adam", "lbfgs"])
def test_bo_loop(tmp_path, fit):
    pytest.importorskip("botorch")
    rows = run_bo(
        tmp_path,
        fit=fit,
        functions=["ackley"],
        iterations=2,
        init_steps=2,
        steps=1,
        grid_size=5,
        num_restarts=1,
        raw_samples=8,
        mc_samples=16,
        log=lambda s: None,
    )
    assert [r["num_data"] for r in rows if r["model"] == "wiski"] == [8, 11]
    assert all(r["best"] <= 0 for r in rows) and (tmp_path / "bo.png").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("model", ["wiski", "exact"])
def test_bo_run_killed_and_rerun_resumes_its_checkpoint_exactly(tmp_path, monkeypatch, model):
    """A run killed after its checkpoint at iteration 2 and run again chooses the candidates and finds the values of
    an uninterrupted run (the model, the evaluations and torch's random state all come back)."""
    pytest.importorskip("botorch")
    import onlinegp.experiments.bench.wiski as bench

    options = BoOptions(functions=["ackley"], models=[model], iterations=4, init_steps=2, steps=2, grid_size=5,
                        num_restarts=1, raw_samples=8, mc_samples=16)  # fmt: skip
    (spec,) = bench.bo_specs(options)
    chosen, kill_at = [], [None]
    candidates = bench.BatchUCB.candidates

    def recording(self, gp, bounds, iteration):
        if iteration == kill_at[0]:
            raise KeyboardInterrupt
        cand = candidates(self, gp, bounds, iteration)
        chosen.append((iteration, cand))
        return cand

    monkeypatch.setattr(bench.BatchUCB, "candidates", recording)
    whole = bench.bo_job(spec.config, tmp_path / "whole", checkpoint_every=0.0)
    uninterrupted, chosen[:] = list(chosen), []
    kill_at[0] = 3
    with pytest.raises(KeyboardInterrupt):
        bench.bo_job(spec.config, tmp_path / "killed", checkpoint_every=0.0)
    assert (tmp_path / "killed" / bench.BO_CHECKPOINT).is_file()
    kill_at[0], chosen[:] = None, []
    resumed = bench.bo_job(spec.config, tmp_path / "killed", checkpoint_every=0.0)
    assert [i for i, _ in chosen] == [3, 4]  # iterations 1-2 came from the checkpoint
    for (i, cand), (j, expected) in zip(chosen, uninterrupted[2:]):
        assert i == j and torch.equal(cand, expected)
    rows = {name: json.loads((tmp_path / name / "metrics.json").read_text()) for name in ("whole", "killed")}
    assert [r["best"] for r in rows["killed"]] == [r["best"] for r in rows["whole"]]
    assert resumed == whole and not (tmp_path / "killed" / bench.BO_CHECKPOINT).exists()


def test_bo_table_marks_the_iterations_and_counts_the_seeds_that_reached_them():
    from onlinegp.experiments.bench.wiski import bo_table

    def run(seed, bests, times):
        return [{"function": "levy", "model": "wiski", "seed": seed, "iteration": i + 1, "best": b, "time": t}
                for i, (b, t) in enumerate(zip(bests, times))]  # fmt: skip

    rows = run(0, [-3.0, -2.0, -1.0], [1.0, 2.0, 4.0]) + run(1, [-5.0, -4.0], [3.0, 5.0])
    table = bo_table(rows, marks=(2,), window=1)
    assert "| best after 2 | best after 3 | s/iteration, first 1 | s/iteration, last 1 |" in table
    # first iterations: (1 + 3) / 2; last: (4 + 5) / 2
    assert "| levy | wiski | 0,1 | -3.000 ± 1.000 (2) | -1.000 ± 0.000 (1) | 2 | 4.5 |" in table


def test_bo_functions_are_the_papers_with_table_2_noise():
    """Stanton et al. 2021, appendix C.2 and Table 2: six noisy 3-D BoTorch functions, the default everywhere."""
    assert {name: noise for name, (_, noise) in BO_FUNCTIONS.items()} == {
        "levy": 10.0,
        "ackley": 4.0,
        "styblinski-tang": 20.0,
        "rastrigin": 10.0,
        "griewank": 4.0,
        "michalewicz": 5.0,
    }
    test_functions = pytest.importorskip("botorch.test_functions")
    for cls, noise in BO_FUNCTIONS.values():
        f = getattr(test_functions, cls)(dim=3, noise_std=noise, negate=True)
        assert f.dim == 3 and f.noise_std == noise
    assert BoOptions().functions == tuple(BO_FUNCTIONS)
    bench = typer.main.get_command(app).commands["bench"].commands["wiski-bo"]
    cli_default = next(p.default for p in bench.params if p.name == "functions")
    assert cli_default.split(",") == list(BO_FUNCTIONS)


def test_bo_authors_kernel_is_their_matern_with_priors_and_the_product_form_on_wiskis_grid(tmp_path):
    from gpytorch.kernels import MaternKernel

    from onlinegp.kernels.product_matern import ProductMatern52Kernel

    wiski = make_model("wiski", 3, grid_size=6, kernel=authors_bo_kernel("wiski"))
    exact = make_model("exact", 3, kernel=authors_bo_kernel("exact"))
    assert isinstance(wiski.kernel.base_kernel, ProductMatern52Kernel) and wiski.algebra == "kronecker"
    assert isinstance(exact.kernel.base_kernel, MaternKernel) and exact.kernel.base_kernel.nu == 2.5
    for model in (wiski, exact):
        priors = {name: prior for name, _, prior, _, _ in model.kernel.named_priors()}
        assert {name.split(".")[-1] for name in priors} == {"outputscale_prior", "lengthscale_prior"}
        assert model.kernel.base_kernel.lengthscale.numel() == 1
    with pytest.raises(ValueError, match="kernel"):
        run_bo(tmp_path, functions=["levy"], kernel="matern", iterations=1)


def test_bo_unknown_function_fails_before_work(tmp_path):
    with pytest.raises(ValueError, match="fit must be"):
        run_bo(tmp_path, functions=["levy"], fit="newton", log=lambda s: None)
    with pytest.raises(ValueError, match="rosenbrock"):
        run_bo(tmp_path, functions=["levy", "rosenbrock"], log=lambda s: None)
    assert not (tmp_path / "metrics.json").exists()
    args = ["bench", "wiski-bo", "--functions", "hartmann", "--num-restarts", "2", "--raw-samples", "8"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path), "-q"])
    assert result.exit_code == 2 and "hartmann" in result.output
    # --seeds reads ranges as every bench's does, and refuses what it cannot read before any work
    result = CliRunner().invoke(app, ["bench", "wiski-bo", "--seeds", "3-1", "--out", str(tmp_path), "-q"])
    assert result.exit_code == 2 and "cannot read seeds '3-1'" in result.output
    assert BENCHES["wiski-bo"].specs(BoOptions(functions=["levy"], models=["wiski"], seeds=[0, 1, 2]))[2].run_id == (
        "levy/wiski/seed2"
    )


def test_bo_beta_decays_as_asked(tmp_path, monkeypatch):
    """UCB's β at iteration t is beta · beta_decay^(t−1) (the authors' code: 0.9^t from 1)."""
    botorch_acquisition = pytest.importorskip("botorch.acquisition")
    seen = []

    class Recording(botorch_acquisition.qUpperConfidenceBound):
        def __init__(self, *args, beta, **kwargs):
            seen.append(beta)
            super().__init__(*args, beta=beta, **kwargs)

    monkeypatch.setattr(botorch_acquisition, "qUpperConfidenceBound", Recording)
    options = dict(functions=["ackley"], models=["exact"], init_steps=1, steps=1, num_restarts=1, raw_samples=4)
    run_bo(tmp_path, iterations=3, beta=1.0, beta_decay=0.9, log=lambda s: None, **options)
    assert seen == pytest.approx([1.0, 0.9, 0.81])
    with pytest.raises(ValueError, match="beta_decay"):
        run_bo(tmp_path, beta_decay=1.5, log=lambda s: None, **options)


@pytest.mark.slow
def test_bo_loop_on_the_appendix_functions(tmp_path):
    """A step on each added function: the best noise-free value never decreases and stays below the optimum."""
    pytest.importorskip("botorch")
    names = ["styblinski-tang", "rastrigin", "griewank", "michalewicz"]
    rows = run_bo(
        tmp_path, functions=names, models=["exact"], iterations=2, init_steps=1, steps=1, num_restarts=1,
        raw_samples=8, mc_samples=8, log=lambda s: None,
    )  # fmt: skip
    assert [r["function"] for r in rows] == [n for n in names for _ in range(2)]
    # noise-free maxima of the negated functions (Michalewicz: below 3, its sum of three terms each at most 1)
    optimum = {"styblinski-tang": 39.16617 * 3, "rastrigin": 0.0, "griewank": 0.0, "michalewicz": 3.0}
    for name in names:
        best = [r["best"] for r in rows if r["function"] == name]
        assert best[0] <= best[1] <= optimum[name] and torch.isfinite(torch.tensor(best)).all()


def test_table_c1_rates_per_dataset():
    """Stanton et al. 2021, Table C.1: elevators and protein learn slower than skillcraft; unlisted sets take its row."""
    sk, el = _wiski_options("skillcraft", 200), _wiski_options("elevators", 200)
    assert (sk["pretrain_lr"], sk["pretrain_lr_projection"], sk["lr"], sk["lr_projection"]) == (5e-2, 5e-3, 5e-3, 5e-4)
    assert (el["pretrain_lr"], el["pretrain_lr_projection"], el["lr"], el["lr_projection"]) == (1e-2, 1e-3, 1e-3, 1e-4)
    assert _wiski_options("kin40k", 7) == {**sk, "pretrain_steps": 7} and sk["grid_size"] == 16


def test_hindsight_exact_is_an_exact_gp_fitted_on_the_points_seen():
    """One checkpoint: the exact GP fitted by L-BFGS on the first n points, scored on the test points; more
    checkpoints: one row each, the later ones warm-started."""
    g = torch.Generator().manual_seed(3)
    X = torch.rand(60, 2, dtype=torch.float64, generator=g) * 2 - 1
    y = torch.sin(3 * X[:, 0]) + 0.1 * torch.randn(60, dtype=torch.float64, generator=g)
    Xt, yt = X[40:], y[40:]
    (row,), fitted = hindsight_exact(X, y, Xt, yt, [40], (0.0, 1.0))
    box = torch.tensor([[-1.0, -1.0], [1.0, 1.0]], dtype=torch.float64)
    gp = make_model("exact", 2, num_steps=0, max_data=40, x_bounds=box, y_stats=(0.0, 1.0))
    lbfgs_exact_gp(gp, X[:40], y[:40], max_iter=100)
    pred = gp.predict(Xt)
    assert row["num_data"] == 40
    assert row["rmse"] == pytest.approx(float((pred.mean - yt).pow(2).mean().sqrt()), rel=1e-12)
    assert fitted.num_data == 40
    curve, _ = hindsight_exact(X, y, Xt, yt, [10, 25, 40], (0.0, 1.0))
    assert [r["num_data"] for r in curve] == [10, 25, 40]
    assert curve[-1]["rmse"] == pytest.approx(row["rmse"], rel=1e-3)  # warm start, same optimum


def test_bo_run_that_fails_numerically_ends_alone_and_the_rest_are_written(tmp_path, monkeypatch):
    """A CholeskyError in one model's run (O-SVGP on Michalewicz did this) stops that run only: its finished
    iterations are kept, the other models run, metrics are written after every run."""
    pytest.importorskip("botorch")
    import onlinegp.experiments.bench.wiski as bench
    from onlinegp.linalg import CholeskyError

    def failing(name, *args, **kwargs):
        model = make_recorded_model(name, *args, **kwargs)  # a run's model: built from its config
        if name == "wiski":
            update, calls = model.update, []

            def update_then_fail(x, y):
                calls.append(1)
                if len(calls) == 3:  # the initial batch, iteration 1, then iteration 2 fails
                    raise CholeskyError("not positive definite")
                return update(x, y)

            model.update = update_then_fail
        return model

    monkeypatch.setattr(bench, "make_recorded_model", failing)
    logs = []
    rows = run_bo(
        tmp_path,
        functions=["ackley"],
        iterations=3,
        init_steps=1,
        steps=1,
        grid_size=5,
        num_restarts=1,
        raw_samples=8,
        mc_samples=16,
        log=logs.append,
    )
    assert [r["iteration"] for r in rows if r["model"] == "wiski"] == [1]
    assert [r["iteration"] for r in rows if r["model"] == "exact"] == [1, 2, 3]
    assert any("stopped at iteration 2: CholeskyError" in line for line in logs)
    assert json.loads((tmp_path / "metrics.json").read_text()) == rows
