"""The experiments of Stanton et al. 2021 (WISKI, §5): online regression on UCI sets, online Dirichlet classification on
banana, and batch Bayesian optimisation with qUCB.

* ``wiski-uci`` (:func:`uci_job`, §5.1, Fig. 3, Table C.1): a 90/10 split, inputs min-max to [-1, 1] over the whole set,
  targets standardised with the training mean and std (all models share this scaling); the first 5% of the (shuffled)
  training stream pre-trains each model (``pretrain_steps`` full-batch steps; WISKI's cosine-annealed at Table C.1's
  batch rates), then points arrive one at a time with one optimiser step each (WISKI at Table C.1's online rates, per
  dataset: :data:`TABLE_C1`). Test NLL and RMSE (standardised units) every ``eval_every`` points, and the median
  wall-clock time of the single-point updates since the previous evaluation (the first row of each run holds the
  pre-training time). Two comparisons, told apart by the ``inputs`` column:

  - ``shared`` (the paper's: "each model learned a linear projection from R^d to R^2 ... batch-norm ... tanh"):
    one projection h(x) = tanh(BN(Ax + b)/2) is learnt by pre-training a WISKI on the 5% batch, then frozen, and
    every model of ``models`` (WISKI on a 16² grid, OSGPR, O-SVGP, the exact GP) sees the same 2-D features h(x),
    so that the approximations, not the features, are compared.
  - ``all`` (not the paper's): the models of ``all_input_models`` on all D inputs: OSGPR with an ARD kernel over
    them, WISKI learning its own projection online (Eq. 18).

  An exact GP streamed like the others runs only when the stream fits in ``exact_max`` points; the hindsight
  reference, ``exact GP (batch)``, is an exact GP fitted by L-BFGS on the shared features of every point seen so far,
  at each evaluation point (:func:`hindsight_exact`; streams up to ``batch_exact_max`` points): a curve. A sweep of
  one run per dataset, seed and model (each learns the seeded projection again), kept in ``results/wiski-uci/``.
* ``wiski-banana`` (§5.2, Fig. 4): the WISKI Dirichlet classifier, 5% pre-training then one point at a time; test
  accuracy and NLL against points seen, with the hindsight classifier trained on all the data in one batch.
* ``wiski-bo`` (:func:`bo_job`, §5.3, appendix C.2): the paper's noisy 3-D test functions from
  ``botorch.test_functions`` with Table 2's noise stds (:data:`BO_FUNCTIONS`: Levy, Ackley, StyblinskiTang, Rastrigin,
  Griewank, Michalewicz), 5 random initial points, then qUCB with q = 3 optimised by ``optimize_acqf`` on WISKI and an
  exact GP, each updated online with the new batch and ``steps`` Adam steps; the best noise-free value found and the
  time per iteration (acquisition optimisation + update). A sweep of one run per function, model and seed, kept in
  ``results/wiski-bo/``; a run checkpoints itself every :data:`BO_CHECKPOINT_EVERY_S` seconds and resumes exactly.

Every bench here is a sweep (:mod:`onlinegp.experiments.bench.runner`): its runs are kept in the results tree, and it
writes the table (``table.md``) and figures of its finished runs to ``out``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...base import model_record
from ...data import load_dataset, train_test_split
from ...io import atomic_write, write_csv
from ...linalg import CholeskyError
from ...metrics import nlpd, rmse
from ...models.osvgp import OSVGP
from ...models.registry import MODELS, make_model, make_recorded_model
from ...models.wiski import WISKIClassifier
from ...training import Pretraining, Training
from ..flags import option
from ..protocols import (
    BO_FUNCTIONS,
    BO_KERNELS,
    bo_model_options,
    bo_problem,
    lbfgs_exact_gp,
    set_steps,
)
from .parse import comma_ints, comma_items, parse_seeds
from .protocol import Bench, Echo
from .runner import RunSpec, SweepResult

UCI_SETS = ("skillcraft", "elevators", "protein", "kin40k")
UCI_MODELS = ("wiski", "osgpr", "osvgp", "exact")
ALL_INPUT_MODELS = ("wiski", "osgpr")
#: per-model options of the streaming comparison: m = 256 everywhere (Stanton et al. 2021, Table C.1), one step per
#: point
STREAM_OPTIONS: dict[str, dict[str, Any]] = {
    "wiski": {"grid_size": 16},
    "osgpr": {"num_inducing": 256, "optimizer": "adam", "kernel": "rbf"},
    "osvgp": {"num_inducing": 256, **OSVGP.PAPER},  # Stanton et al.'s O-SVGP settings, not our batched defaults
    "exact": {},
}
#: WISKI's learning rates per dataset (Stanton et al. 2021, Table C.1): η_batch(θ), η_batch(φ), η_online(θ),
#: η_online(φ); sets the table does not list take the skillcraft row
TABLE_C1: dict[str, dict[str, float]] = {
    name: dict(zip(("pretrain_lr", "pretrain_lr_projection", "lr", "lr_projection"), rates))
    for name, rates in {
        "skillcraft": (5e-2, 5e-3, 5e-3, 5e-4),
        "powerplant": (5e-2, 5e-3, 5e-3, 5e-4),
        "elevators": (1e-2, 1e-3, 1e-3, 1e-4),
        "protein": (1e-2, 1e-3, 1e-3, 1e-4),
    }.items()
}


def _write(out: Path, name: str, rows: list[dict], config: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2, default=str))
    (out / f"{name}.json").write_text(json.dumps(rows, indent=1, default=float))
    if rows:
        write_csv(out / f"{name}.csv", rows)


def _config(experiment: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A run's config.json: the experiment, its ``arguments`` (the bench's options, or a function's ``locals()`` on
    entry) but where it writes and how it reports (out, quiet, log), then ``extra``."""
    return {
        "experiment": experiment,
        **{k: v for k, v in arguments.items() if k not in ("out", "quiet", "log")},
        **extra,
    }


def _progress(total: int, quiet: bool, description: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=quiet, desc=description, leave=False)


# ---------------------------------------------------------------------------------------------- UCI regression
def _wiski_options(dataset: str, pretrain_steps: int) -> dict[str, Any]:
    return {
        **STREAM_OPTIONS["wiski"],
        **TABLE_C1.get(dataset, TABLE_C1["skillcraft"]),
        "pretrain_steps": pretrain_steps,
    }


def shared_projection(
    dataset: str,
    X0: torch.Tensor,
    y0: torch.Tensor,
    bounds: torch.Tensor,
    y_stats: tuple[float, float],
    pretrain_steps: int,
    seed: int,
) -> Callable[[torch.Tensor], torch.Tensor]:
    """The frozen map x ↦ h(x) ∈ [-1, 1]² that a WISKI seeded with ``seed`` learns in ``pretrain_steps`` pre-training
    steps on (X0, y0) (Stanton et al. 2021, §5.1)."""
    options = _wiski_options(dataset, pretrain_steps)
    projector = make_recorded_model("wiski", X0.shape[1], x_bounds=bounds, y_stats=y_stats, seed=seed, **options)
    projector.update(X0, y0)

    @torch.no_grad()
    def h(X: torch.Tensor) -> torch.Tensor:
        return projector.features(projector.scaler.x(X))

    return h


def hindsight_exact(
    X: torch.Tensor,
    y: torch.Tensor,
    X_test: torch.Tensor,
    y_test: torch.Tensor,
    checkpoints: Sequence[int],
    y_stats: tuple[float, float],
    seed: int = 0,
    quiet: bool = True,
    max_iter: int = 100,
) -> tuple[list[dict], Any]:
    """The exact GP in hindsight at each of ``checkpoints``: fitted by L-BFGS (``max_iter`` iterations) on the first n
    points of the stream, warm-started from the fit at the previous checkpoint; test NLL and RMSE in standardised
    units and the fit's seconds (``update_time``). The reference curve of the streamed models (features in
    [-1, 1]). Returns the rows and the last checkpoint's GP."""
    y_mean, y_std = y_stats
    box = torch.tensor([[-1.0] * X.shape[1], [1.0] * X.shape[1]], dtype=torch.float64)
    rows, previous = [], None
    bar = _progress(len(checkpoints), quiet, "exact GP (batch)")
    for n in checkpoints:
        gp = make_model("exact", X.shape[1], num_steps=0, max_data=n, x_bounds=box, y_stats=y_stats, seed=seed)
        if previous is not None:
            gp.kernel.load_state_dict(previous.kernel.state_dict())
            gp.likelihood.load_state_dict(previous.likelihood.state_dict())
        t0 = time.perf_counter()
        lbfgs_exact_gp(gp, X[:n], y[:n], max_iter=max_iter)
        seconds = time.perf_counter() - t0
        pred = gp.predict(X_test)
        ys, ms, vs = (y_test - y_mean) / y_std, (pred.mean - y_mean) / y_std, pred.var_y / y_std**2
        rows.append({"num_data": n, "nll": nlpd(ys, ms, vs), "rmse": rmse(ys, ms), "update_time": seconds})
        previous = gp
        bar.update(1)
    bar.close()
    return rows, previous


def uci_stream(name: str, seed: int, pretrain_fraction: float = 0.05, max_test: int = 1000):
    """A 90/10 split of a UCI set, the training rows shuffled by ``seed``: (X, y, X_test, y_test, the whole set's input
    bounds, the size of the pre-training batch, ``pretrain_fraction`` of the training rows)."""
    ds = load_dataset(name)
    train, test = train_test_split(ds, seed=seed, test_fraction=0.1)
    test = test.subsample(max_test, seed=seed)
    order = np.random.default_rng(seed).permutation(len(train))
    X, y = train.tensors()
    Xt, yt = test.tensors()
    bounds = torch.stack([torch.as_tensor(ds.X.min(0)), torch.as_tensor(ds.X.max(0))])
    return X[order], y[order], Xt, yt, bounds, max(2, int(math.ceil(pretrain_fraction * len(train))))


def stream_one_at_a_time(
    gp: Any,
    X: torch.Tensor,
    y: torch.Tensor,
    X_test: torch.Tensor,
    y_test: torch.Tensor,
    n0: int,
    n_stream: int,
    eval_every: int,
    pretrain_steps: int,
    quiet: bool,
    description: str,
) -> tuple[list[dict], list[float]]:
    """Pre-train ``gp`` on the first ``n0`` rows (``pretrain_steps`` steps), then stream the next ``n_stream`` one at a
    time with one step each; test NLL and RMSE (units of y's std) every ``eval_every`` points, with the median update
    time since the previous evaluation (the first row: the pre-training time). Returns the rows and every update's
    seconds."""
    y_mean, y_std = float(y.mean()), float(y.std())
    rows: list[dict] = []

    def evaluate(n_seen: int, update_time: float) -> None:
        pred = gp.predict(X_test)
        ys, ms, vs = (y_test - y_mean) / y_std, (pred.mean - y_mean) / y_std, pred.var_y / y_std**2
        rows.append({"num_data": n_seen, "nll": nlpd(ys, ms, vs), "rmse": rmse(ys, ms), "update_time": update_time})

    set_steps(gp, pretrain_steps)
    t0 = time.perf_counter()
    gp.update(X[:n0], y[:n0])
    evaluate(n0, time.perf_counter() - t0)
    set_steps(gp, 1)
    times: list[float] = []
    bar = _progress(n_stream, quiet, description)
    for i in range(n0, n0 + n_stream):
        t0 = time.perf_counter()
        gp.update(X[i : i + 1], y[i : i + 1])
        times.append(time.perf_counter() - t0)
        bar.update(1)
        if (i + 1 - n0) % eval_every == 0 or i + 1 == n0 + n_stream:
            evaluate(i + 1, float(np.median(times[-eval_every:])))
    bar.close()
    return rows, times


@dataclass(frozen=True)
class UciOptions:
    """``onlinegp bench wiski-uci``: the UCI ``datasets``; the ``models`` on the shared learnt projection and the
    ``all_input_models`` on all D inputs; ``max_points`` streamed one at a time after pre-training on
    ``pretrain_fraction`` of the training rows (``pretrain_steps`` full-batch steps); evaluation every
    ``eval_every`` points on at most ``max_test`` test points; the streamed exact GP up to ``exact_max`` points, the
    hindsight one up to ``batch_exact_max``; ``seeds``: one split and shuffle each."""

    datasets: Sequence[str] = option(UCI_SETS, "comma-separated UCI sets", parse=comma_items)
    models: Sequence[str] = option(
        UCI_MODELS, "comma-separated registered models, all on the shared learnt projection", parse=comma_items
    )
    all_input_models: Sequence[str] = option(
        ALL_INPUT_MODELS, "comma-separated models also run on all D inputs (a second table)", parse=comma_items
    )
    max_points: int = option(500, "points streamed one at a time after pre-training")
    max_test: int = option(1000, "at most this many test points")
    eval_every: int = option(50, "evaluate on the test set every this many points")
    pretrain_fraction: float = 0.05
    pretrain_steps: int = option(200, "full-batch steps on the 5% pre-training batch (Table C.1: 200 epochs)")
    exact_max: int = option(1500, "run the exact GP only up to this many points")
    batch_exact_max: int = option(
        5000,
        "the hindsight exact GP (L-BFGS on all points seen, at every evaluation) on streams up to this many points",
    )
    seeds: Sequence[int] = option((0,), "seeds (split and shuffle), e.g. 0-3, 0,3 or 0-2,7", parse=parse_seeds)


#: the run id's model part of the hindsight exact GP (:func:`hindsight_exact`), and its label in tables and figures
HINDSIGHT, HINDSIGHT_LABEL = "exact-batch", "exact GP (batch)"
#: a wiski-uci run's files kept in the results tree (``results/wiski-uci/``); model.json: the options its model ran
#: with (base.model_record)
UCI_SUMMARY = ("metrics.json", "model.json")
#: the shared projection's box: h(x) lies in [-1, 1]²
UNIT_SQUARE = torch.tensor([[-1.0, -1.0], [1.0, 1.0]], dtype=torch.float64)


def _uci_model_options(dataset: str, model: str, pretrain_steps: int) -> dict[str, Any]:
    """``model``'s constructor options in a wiski-uci stream (WISKI: Table C.1's rates for ``dataset``)."""
    return _wiski_options(dataset, pretrain_steps) if model == "wiski" else dict(STREAM_OPTIONS.get(model, {}))


def uci_specs(options: UciOptions) -> list[RunSpec]:
    """The runs of ``wiski-uci``, per dataset and seed: ``<dataset>/shared/<model>/seed<k>`` for each of ``models``
    on the shared projection and ``exact-batch`` (the hindsight reference, where the stream fits ``batch_exact_max``
    points), ``<dataset>/all/<model>/seed<k>`` for each of ``all_input_models``; the streamed exact GP only where the
    stream fits ``exact_max`` points."""
    o = options
    unknown = sorted((set(o.models) | set(o.all_input_models)) - set(MODELS))
    if unknown:
        raise ValueError(f"unknown models {unknown}: choose registered models ({', '.join(sorted(MODELS))})")
    if o.max_points < 1 or o.eval_every < 1:
        raise ValueError(f"need max_points >= 1 and eval_every >= 1, got {o.max_points} and {o.eval_every}")
    specs = []
    for name in o.datasets:
        for seed in o.seeds:
            _, y, _, _, _, n0 = uci_stream(name, seed, o.pretrain_fraction, o.max_test)
            end = n0 + min(o.max_points, len(y) - n0)
            common = dict(
                dataset=name,
                seed=int(seed),
                max_points=o.max_points,
                max_test=o.max_test,
                eval_every=o.eval_every,
                pretrain_fraction=o.pretrain_fraction,
                pretrain_steps=o.pretrain_steps,
            )
            runs = [("shared", m) for m in o.models if m != "exact" or end <= o.exact_max]
            runs += [("shared", HINDSIGHT)] if end <= o.batch_exact_max else []
            runs += [("all", m) for m in o.all_input_models if m != "exact" or end <= o.exact_max]
            for inputs, model in runs:
                opts = {"max_iter": 100} if model == HINDSIGHT else _uci_model_options(name, model, o.pretrain_steps)
                config = common | {"inputs": inputs, "model": model, "options": opts}
                specs.append(RunSpec(f"{name}/{inputs}/{model}/seed{seed}", config))
    return specs


def uci_job(config: dict, run_dir: str) -> dict:
    """One run of ``wiski-uci`` (Stanton et al. 2021, §5.1): ``config["model"]`` streamed one point at a time on the
    shared projection (learnt by a WISKI pre-trained on the stream's first batch, seeded, so every run of a dataset and
    seed sees the same features) or on all inputs, or the hindsight exact GP's curve; writes metrics.json and
    model.json, returns the last evaluation with the median update time."""
    c = config
    X, y, Xt, yt, bounds, n0 = uci_stream(c["dataset"], c["seed"], c["pretrain_fraction"], c["max_test"])
    n_stream = min(c["max_points"], len(y) - n0)
    y_stats = (float(y.mean()), float(y.std()))
    if c["inputs"] == "shared":
        h = shared_projection(c["dataset"], X[:n0], y[:n0], bounds, y_stats, c["pretrain_steps"], c["seed"])
        X, Xt, bounds = h(X), h(Xt), UNIT_SQUARE
    every = c["eval_every"]
    if c["model"] == HINDSIGHT:
        checkpoints = [n0, *range(n0 + every, n0 + n_stream, every), n0 + n_stream]
        rows, gp = hindsight_exact(X, y, Xt, yt, checkpoints, y_stats, c["seed"], max_iter=c["options"]["max_iter"])
        times = [r["update_time"] for r in rows]
    else:
        gp = make_recorded_model(
            c["model"], X.shape[1], x_bounds=bounds, y_stats=y_stats, seed=c["seed"], **c["options"]
        )
        rows, times = stream_one_at_a_time(gp, X, y, Xt, yt, n0, n_stream, every, c["pretrain_steps"], True, "")
    atomic_write(Path(run_dir) / "metrics.json", json.dumps(rows, indent=1))
    atomic_write(Path(run_dir) / "model.json", json.dumps(model_record(gp), indent=1))
    return {**rows[-1], "median_update_s": float(np.median(times))}


def _uci_label(config: dict) -> str:
    if config["model"] == HINDSIGHT:
        return HINDSIGHT_LABEL
    return config["model"] if config["inputs"] == "shared" else f"{config['model']} (all inputs)"


def _milliseconds(seconds: float) -> str:
    """3 significant digits, whole milliseconds from a second on."""
    return f"{1000 * seconds:.3g}" if seconds < 1 else f"{1000 * seconds:.0f}"


def uci_table(finals: dict[tuple[str, str], list[dict]]) -> str:
    """table.md: per dataset and model, the final test NLL and RMSE (mean ± std over seeds) and the median update."""
    lines = [
        "Test NLL and RMSE (standardised targets) at the end of each stream, mean ± std over the seeds, and the median",
        "single-point update over the stream (the hindsight exact GP: its median L-BFGS fit at the evaluation points).",
        "",
        "| dataset | model | seeds | points | NLL | RMSE | median update (ms) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (name, label), rows in finals.items():
        nll, err, t = (np.array([r[k] for r in rows]) for k in ("nll", "rmse", "median_update_s"))
        spread = (lambda v: f" ± {v.std():.3f}") if len(rows) > 1 else (lambda v: "")
        lines.append(
            f"| {name} | {label} | {len(rows)} | {rows[0]['num_data']} | {nll.mean():.3f}{spread(nll)} | "
            f"{err.mean():.3f}{spread(err)} | {_milliseconds(t.mean())} |"
        )
    return "\n".join(lines) + "\n"


def uci_summarise(out: Path, sweep: SweepResult, options: UciOptions, quiet: bool, log: Echo) -> list[dict]:
    """Online regression (Stanton et al. 2021, §5.1, Fig. 3) of the finished runs: every evaluation in metrics.json and
    metrics.csv (one row per run and evaluation), ``uci.png`` and ``table.md``; returns the rows."""
    for failed in sweep.failed:
        log(f"run {failed.run_id} failed: {failed.error}")
    values = {r.run_id: r.value for r in sweep.runs if r.status in ("done", "skipped")}
    rows, finals = [], {}
    for spec in sweep.specs:
        if spec.run_id not in values:
            continue
        c, label = spec.config, _uci_label(spec.config)
        curve = json.loads((out / spec.run_id / "metrics.json").read_text())
        rows += [{"dataset": c["dataset"], "inputs": c["inputs"], "model": label, "seed": c["seed"]} | r for r in curve]
        finals.setdefault((c["dataset"], label), []).append(values[spec.run_id])
    out.mkdir(parents=True, exist_ok=True)
    _write(out, "metrics", rows, {"experiment": "wiski-uci", **asdict(options)})
    (out / "table.md").write_text(uci_table(finals))
    if rows:
        from ..plots import plot_panel_curves

        plot_panel_curves(
            rows,
            out / "uci.png",
            ("nll", "rmse", "update_time"),
            style_key="seed",
            log_keys=("update_time",),
            title="WISKI online regression\n(Stanton et al. 2021, Fig. 3)"
            + ("\n'(all inputs)': not on the shared projection" if any(r["inputs"] == "all" for r in rows) else ""),
        )
    if not quiet:
        log((out / "table.md").read_text())
    return rows


# ---------------------------------------------------------------------------------------------- classification
def banana_stream(
    out: str | Path,
    pretrain_fraction: float = 0.05,
    pretrain_steps: int = 100,
    hindsight_steps: int = 200,
    eval_every: int = 20,
    max_test: int = 2000,
    grid_size: int = 16,
    lr: float = 5e-3,
    seed: int = 0,
    max_points: int | None = None,
    quiet: bool = False,
) -> list[dict]:
    """Online Dirichlet classification on banana (Stanton et al. 2021, §5.2) into ``out`` (``config.json``,
    ``metrics.json``, ``metrics.csv``); one row per evaluation, the hindsight classifier's first and last.
    ``wiski-banana`` runs it as a sweep of one run."""
    config = _config("wiski-banana", locals())
    out = Path(out)
    train, test = load_dataset("banana", split="train"), load_dataset("banana", split="test").subsample(max_test, seed)
    X, labels = train.tensors()
    order = torch.as_tensor(np.random.default_rng(seed).permutation(len(train)))
    X, labels = X[order], labels[order].long()
    Xt, lt = test.tensors()
    lt = lt.long()
    bounds = torch.stack(
        [
            torch.as_tensor(np.minimum(train.X.min(0), test.X.min(0))),
            torch.as_tensor(np.maximum(train.X.max(0), test.X.max(0))),
        ]
    )
    n0 = max(2, int(math.ceil(pretrain_fraction * len(train))))
    end = len(train) if max_points is None else min(len(train), n0 + int(max_points))
    rows: list[dict] = []

    def evaluate(clf: WISKIClassifier, model: str, n_seen: int, update_time: float) -> None:
        proba = clf.predict_proba(Xt)
        acc = float((clf.predict(Xt) == lt).double().mean())
        nll = float(-proba.gather(1, lt[:, None]).clamp_min(1e-12).log().mean())
        rows.append(
            {
                "dataset": "banana",
                "model": model,
                "num_data": n_seen,
                "accuracy": acc,
                "nll": nll,
                "update_time": update_time,
            }
        )

    def classifier(steps: int) -> WISKIClassifier:
        training = Training(lr=lr, pretrain=Pretraining(steps=steps))
        return WISKIClassifier(2, 2, grid_size=grid_size, training=training, x_bounds=bounds, seed=seed)

    hindsight = classifier(hindsight_steps)
    t0 = time.perf_counter()
    hindsight.update(X, labels)
    evaluate(hindsight, "wiski-hindsight", len(train), time.perf_counter() - t0)
    clf = classifier(pretrain_steps)
    t0 = time.perf_counter()
    clf.update(X[:n0], labels[:n0])
    evaluate(clf, "wiski", n0, time.perf_counter() - t0)
    times: list[float] = []
    bar = _progress(end - n0, quiet, "banana/wiski")
    for i in range(n0, end):
        t0 = time.perf_counter()
        clf.update(X[i : i + 1], labels[i : i + 1])
        times.append(time.perf_counter() - t0)
        bar.update(1)
        if (i + 1 - n0) % eval_every == 0 or i + 1 == end:
            evaluate(clf, "wiski", i + 1, float(np.median(times[-eval_every:])))
    bar.close()
    rows.append({**rows[0], "num_data": end})  # the hindsight level at the end of the x-axis, for the plot
    rows[0] = {**rows[0], "num_data": n0}
    _write(out, "metrics", rows, config)
    return rows


#: a banana run's files that the table and figure read (kept in the results tree, ``results/wiski-banana/``)
BANANA_SUMMARY = ("config.json", "metrics.json", "metrics.csv")


def banana_job(config: dict, run_dir: Path) -> dict:
    """:func:`banana_stream` as the runner's job function; returns the final online and hindsight accuracy and NLL."""
    rows = banana_stream(run_dir, **config, quiet=True)
    return {
        "online": {k: rows[-2][k] for k in ("num_data", "accuracy", "nll")},
        "hindsight": {k: rows[-1][k] for k in ("accuracy", "nll")},
    }


def banana_table(rows: list[dict], every: int = 100) -> str:
    """Markdown: test accuracy and NLL of the online classifier after pre-training, every ``every`` points and at the
    end, then the hindsight classifier's (all points in one batch)."""
    online = [r for r in rows if r["model"] == "wiski"]
    n0, end = online[0]["num_data"], online[-1]["num_data"]
    shown = [r for r in online if r["num_data"] in (n0, end) or r["num_data"] % every == 0]
    hindsight = next(r for r in rows if r["model"] == "wiski-hindsight")
    lines = [
        f"Test accuracy and NLL on banana after each number of training points seen: WISKI online ({n0} points "
        f"pre-train it, then one point and one step at a time), and the hindsight classifier fitted on all {end} "
        "in one batch.",
        "",
        "| classifier | points seen | accuracy | NLL |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| WISKI, online | {r['num_data']} | {r['accuracy']:.3f} | {r['nll']:.3f} |" for r in shown]
    lines.append(f"| WISKI, hindsight (one batch) | {end} | {hindsight['accuracy']:.3f} | {hindsight['nll']:.3f} |")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class BananaOptions:
    """``onlinegp bench wiski-banana``: :func:`banana_stream`'s options (a run's config in the results tree)."""

    pretrain_fraction: float = 0.05
    pretrain_steps: int = option(100, "optimiser steps on the 5% pre-training batch")
    hindsight_steps: int = 200
    eval_every: int = option(20, "evaluate every this many points")
    max_test: int = 2000
    grid_size: int = option(16, "grid points per dimension (m = g²)")
    lr: float = 5e-3
    seed: int = option(0, None)
    max_points: int | None = None


def banana_specs(options: BananaOptions) -> list[RunSpec]:
    """One run, ``seed<seed>``."""
    return [RunSpec(f"seed{options.seed}", asdict(options))]


def banana_summarise(out: Path, sweep: SweepResult, options: BananaOptions, quiet: bool, log: Echo) -> list[dict]:
    """Online Dirichlet classification on banana (Stanton et al. 2021, §5.2): ``banana.png`` and ``table.md`` of the
    run (kept in ``results/wiski-banana/``); returns its rows."""
    if sweep.failed:
        raise ValueError(f"wiski-banana run {sweep.failed[0].run_id} failed: {sweep.failed[0].error}")
    rows = json.loads((out / sweep.runs[0].run_id / "metrics.json").read_text())
    log(
        f"[wiski-banana] online accuracy {rows[-2]['accuracy']:.3f} nll {rows[-2]['nll']:.3f}; hindsight accuracy "
        f"{rows[-1]['accuracy']:.3f} nll {rows[-1]['nll']:.3f}"
    )
    from ..plots import plot_panel_curves

    plot_panel_curves(
        rows,
        out / "banana.png",
        ("accuracy", "nll"),
        title="WISKI Dirichlet classification (Stanton et al. 2021, Fig. 4)",
    )
    (out / "table.md").write_text(banana_table(rows))
    if not quiet and sweep.results is not None:
        log(f"run summary kept in {sweep.results} ({sum(r.restored for r in sweep.runs)} restored from there)")
    return rows


# ---------------------------------------------------------------------------------------------- Bayesian optimisation
@dataclass(frozen=True)
class BatchUCB:
    """qUCB's batch of ``q`` candidates (Stanton et al. 2021, §5.3), β at iteration t ``beta · beta_decay^(t−1)``,
    optimised by BoTorch's ``optimize_acqf`` over ``mc_samples`` quasi-Monte Carlo samples."""

    q: int
    beta: float
    beta_decay: float
    num_restarts: int
    raw_samples: int
    mc_samples: int

    def candidates(self, gp: Any, bounds: torch.Tensor, iteration: int) -> torch.Tensor:
        from botorch.acquisition import qUpperConfidenceBound
        from botorch.optim import optimize_acqf
        from botorch.sampling import SobolQMCNormalSampler

        from ...botorch import OnlineGPModel

        acqf = qUpperConfidenceBound(
            OnlineGPModel(gp),
            beta=self.beta * self.beta_decay ** (iteration - 1),
            sampler=SobolQMCNormalSampler(torch.Size([self.mc_samples]), seed=iteration),
        )
        cand, _ = optimize_acqf(
            acqf,
            bounds=bounds,
            q=self.q,
            num_restarts=self.num_restarts,
            raw_samples=self.raw_samples,
            options={"maxiter": 100},
        )
        return cand


def _check_bo_options(functions: Sequence[str], fit: str, kernel: str, beta: float, beta_decay: float) -> None:
    if fit not in ("adam", "lbfgs"):
        raise ValueError(f"fit must be 'adam' or 'lbfgs', got {fit!r}")
    if kernel not in BO_KERNELS:
        raise ValueError(f"kernel must be one of {BO_KERNELS}, got {kernel!r}")
    if not (beta >= 0 and 0 < beta_decay <= 1):
        raise ValueError(f"need beta >= 0 and 0 < beta_decay <= 1, got beta={beta!r}, beta_decay={beta_decay!r}")
    unknown = [name for name in functions if name not in BO_FUNCTIONS]
    if unknown or not functions:
        raise ValueError(f"unknown or no test functions {unknown}; choose from {', '.join(BO_FUNCTIONS)}")


#: seconds between a BO run's checkpoints (model, evaluations, rows, torch's random state): a killed run loses at most
#: this much work and its rerun resumes from the checkpoint, exactly
BO_CHECKPOINT_EVERY_S = 120.0
BO_CHECKPOINT = "checkpoint.pt"
#: a BO run's files kept in the results tree (``results/wiski-bo/``): its rows and the options its model ran with
BO_SUMMARY = ("metrics.json", "model.json")


def bo_job(config: dict, run_dir: Path, checkpoint_every: float = BO_CHECKPOINT_EVERY_S) -> dict:
    """One BO run (one function, model and seed) into ``run_dir``: a row per iteration in metrics.json (the best
    noise-free value found, the acquisition and update times), the model's options in model.json. A checkpoint is
    written at most ``checkpoint_every`` seconds apart; a rerun of the same config resumes it and gives the rows an
    uninterrupted run gives. A numerical failure (CholeskyError) ends the run with the rows it finished, reported in
    the returned value."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    c = config
    f, bounds, X0, Y0 = bo_problem(c)
    opts = bo_model_options(c["model"], c["kernel"], c["fit"], c["grid_size"], c["init_steps"])
    gp = make_recorded_model(c["model"], 3, x_bounds=bounds, seed=c["seed"], **opts)
    ucb = BatchUCB(c["q"], c["beta"], c["beta_decay"], c["num_restarts"], c["raw_samples"], c["mc_samples"])
    X_all, rows = X0.clone(), []
    path = run_dir / BO_CHECKPOINT
    saved = torch.load(path, weights_only=False) if path.is_file() else None
    if saved is not None and saved["config"] == config:
        gp.load_state_dict(saved["model"])
        X_all, rows = saved["X"], saved["rows"]
        torch.set_rng_state(saved["rng"])
    else:
        set_steps(gp, c["init_steps"])
        gp.update(X0, Y0)
        torch.manual_seed(c["seed"] + 1)
    set_steps(gp, c["steps"])
    run = {"function": c["function"], "model": c["model"], "seed": c["seed"], "run": f"{c['model']}/seed{c['seed']}"}
    failure, last_saved = "", time.perf_counter()
    for it in range(len(rows) + 1, c["iterations"] + 1):
        t0 = time.perf_counter()
        try:
            cand = ucb.candidates(gp, bounds, it)
            t1 = time.perf_counter()
            gp.update(cand, f(cand))
        except CholeskyError as err:  # a numerical failure ends this run; its finished iterations are its result
            failure = f"stopped at iteration {it}: {type(err).__name__}: {err}"
            break
        t2 = time.perf_counter()
        X_all = torch.cat([X_all, cand])
        best = float(f(X_all, noise=False).max())  # noise-free, negated: maximised
        rows.append(
            {**run, "iteration": it, "num_data": X_all.shape[0], "best": best, "acquisition_time": t1 - t0,
             "update_time": t2 - t1, "time": t2 - t0}
        )  # fmt: skip
        if time.perf_counter() - last_saved >= checkpoint_every and it < c["iterations"]:
            state = {"config": config, "model": gp.state_dict(), "X": X_all, "rows": rows, "rng": torch.get_rng_state()}
            atomic_write(path, lambda fh: torch.save(state, fh))
            atomic_write(run_dir / "metrics.json", json.dumps(rows, indent=1))
            last_saved = time.perf_counter()
    atomic_write(run_dir / "metrics.json", json.dumps(rows, indent=1))
    atomic_write(run_dir / "model.json", json.dumps(model_record(gp), indent=1))
    path.unlink(missing_ok=True)
    return {"iterations": len(rows), "best": rows[-1]["best"] if rows else None, "failure": failure}


def _bo_summary(rows: list[dict], failure: str) -> str:
    """One BO run in a line: its best value, evaluations and mean time per iteration."""
    if not rows:
        return f"no iteration finished{'; ' + failure if failure else ''}"
    last = rows[-1]
    return (
        f"best {last['best']:.3f} after {last['num_data']} evaluations, mean "
        f"{np.mean([r['time'] for r in rows]):.2f} s/iter{'; ' + failure if failure else ''}"
    )


def bo_table(rows: list[dict], marks: Sequence[int] = (100, 300, 500, 1000, 1500), window: int = 50) -> str:
    """table.md: per function and model, the best noise-free value found after each of ``marks`` iterations (mean ±
    std over the seeds that reached it) and the wall-clock time per iteration (acquisition and update) over the
    first and the last ``window`` iterations of each run, averaged over the seeds: how the cost grows with the data."""
    runs: dict[tuple[str, str], dict[int, list[dict]]] = {}
    for r in rows:
        runs.setdefault((r["function"], r["model"]), {}).setdefault(r["seed"], []).append(r)
    last = max((len(seq) for by_seed in runs.values() for seq in by_seed.values()), default=0)
    marks = [m for m in marks if m < last] + [last]
    lines = [
        "Batch UCB (q = 3): the best noise-free value found (negated: higher is better) after each number of "
        "iterations, mean ± std over the seeds that reached it (their number in brackets), and the wall-clock time "
        f"per iteration (acquisition and update) over each run's first and last {window} iterations, mean over the "
        "seeds.",
        "",
        "| function | model | seeds | "
        + " | ".join(f"best after {m}" for m in marks)
        + f" | s/iteration, first {window} | s/iteration, last {window} |",
        "| --- | --- | --- | " + " | ".join("---" for _ in marks) + " | --- | --- |",
    ]
    for (fname, model), by_seed in runs.items():
        cells = []
        for m in marks:
            best = np.array([seq[m - 1]["best"] for seq in by_seed.values() if len(seq) >= m])
            cells.append(f"{best.mean():.3f} ± {best.std():.3f} ({len(best)})" if len(best) else "")
        first, final = (np.mean([np.mean([r["time"] for r in part(seq)]) for seq in by_seed.values()]) for part in
                        (lambda seq: seq[:window], lambda seq: seq[-window:]))  # fmt: skip
        seeds = ",".join(str(s) for s in by_seed)
        lines.append(f"| {fname} | {model} | {seeds} | " + " | ".join(cells) + f" | {first:.3g} | {final:.3g} |")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class BoOptions:
    """``onlinegp bench wiski-bo``: ``functions`` are keys of :data:`BO_FUNCTIONS` (default: all six of appendix C.2),
    ``models`` registered models; ``iterations`` of ``q`` points from ``n_init`` random ones, per seed; ``init_steps``
    Adam steps on the initial points and ``steps`` per iteration; ``fit='lbfgs'`` fits WISKI and the exact GP to
    convergence by L-BFGS after every iteration (the paper's set-up; O-SVGP keeps its Adam steps); WISKI's
    ``grid_size`` points per dimension. UCB's β at iteration t is ``beta · beta_decay^(t−1)``: the paper does not
    state it; its authors' code decays it as 0.9^t from 1 (``beta=1, beta_decay=0.9``), near-greedy after 30
    iterations. ``kernel``: 'rbf' (ours) or 'authors' (:func:`authors_bo_kernel`; their code also starts from 10
    points, ``n_init=10``). The acquisition's ``num_restarts``, ``raw_samples`` and ``mc_samples``:
    :class:`BatchUCB`."""

    functions: Sequence[str] = option(
        tuple(BO_FUNCTIONS),
        "comma-separated noisy 3-D BoTorch test functions (default: the six of Stanton et al. 2021, appendix C.2)",
        parse=comma_items,
    )
    models: Sequence[str] = option(("wiski", "exact"), "comma-separated registered models", parse=comma_items)
    iterations: int = option(20, "BO iterations (q points each)")
    q: int = 3
    n_init: int = option(5, "random initial points (the paper's text: 5; the authors' code: 10)")
    seeds: Sequence[int] = option((0,), "seeds, e.g. 0-3, 0,3 or 0-2,7", parse=parse_seeds)
    init_steps: int = 50
    steps: int = option(5, "Adam steps per BO iteration (50 on the initial points)")
    fit: str = option("adam", "'adam' (--steps steps) or 'lbfgs': WISKI and the exact GP fitted to convergence (paper)")
    grid_size: int = option(8, "WISKI grid points per dimension (m = g³)")
    beta: float = option(2.0, "UCB's β at the first iteration")
    beta_decay: float = option(
        1.0, "β is multiplied by this every iteration (the authors' code: --beta 1 --beta-decay 0.9)"
    )
    kernel: str = option(
        "rbf",
        "'rbf' (ARD, no priors) or 'authors': their code's Matérn-5/2 with Gamma priors (WISKI: its product form)",
    )
    num_restarts: int = option(4, "L-BFGS-B restarts of the acquisition (paper: 10)")
    raw_samples: int = option(64, "random samples to start them from (paper: 512)")
    mc_samples: int = 128


def bo_specs(options: BoOptions) -> list[RunSpec]:
    """One run per function, model and seed, ``<function>/<model>/seed<k>``; its config is every option but the
    lists."""
    o = options
    _check_bo_options(o.functions, o.fit, o.kernel, o.beta, o.beta_decay)
    shared = {k: v for k, v in asdict(o).items() if k not in ("functions", "models", "seeds")}
    return [
        RunSpec(f"{fname}/{model}/seed{seed}", {"function": fname, "model": model, "seed": int(seed), **shared})
        for fname in o.functions
        for model in o.models
        for seed in o.seeds
    ]


def bo_summarise(out: Path, sweep: SweepResult, options: BoOptions, quiet: bool, log: Echo) -> list[dict]:
    """Batch UCB (Stanton et al. 2021, §5.3) of the finished runs: a line per run, metrics.json/csv (a row per
    iteration of every run), ``table.md`` (:func:`bo_table`) and ``bo.png``; returns the rows."""
    for failed in sweep.failed:
        log(f"[wiski-bo] run {failed.run_id} failed: {failed.error}")
    rows: list[dict] = []
    for result in sweep.runs:
        if result.status not in ("done", "skipped"):
            continue
        run_rows = json.loads((out / result.run_id / "metrics.json").read_text())
        value = result.value or {}
        log(f"[wiski-bo] {result.run_id}: {_bo_summary(run_rows, value.get('failure', ''))}")
        rows += run_rows
    _write(out, "metrics", rows, _config("wiski-bo", asdict(options)))
    if rows:
        (out / "table.md").write_text(bo_table(rows))
        from ..plots import plot_panel_curves

        plot_panel_curves(
            rows,
            out / "bo.png",
            ("best", "time"),
            x_key="iteration",
            panel_key="function",
            line_key="run",
            title="Batch UCB (q = 3) on noisy 3-D test functions (Stanton et al. 2021, §5.3)",
        )
        if not quiet:
            log((out / "table.md").read_text())
    return rows


# ---------------------------------------------------------------------------------------------- root-rank ablation
#: Stanton et al. 2021, appendix (root-rank ablation on skillcraft): grid points per dimension → the ranks r of the root
#: of WᵀW in its table (m = 256: r = 128, 192, 256; m = 1024: r = 256, 512, 768, 1024)
RANK_ABLATION: dict[int, tuple[int, ...]] = {16: (128, 192, 256), 32: (256, 512, 768, 1024)}
RANK_SUMMARY = ("metrics.json", "model.json")  # model.json: the options WISKI ran with (base.model_record)


def rank_job(config: dict, run_dir: str) -> dict:
    """One WISKI (its own projection learnt online, all inputs: the paper's regression set-up) streamed through
    ``config["dataset"]`` with a rank-``wtw_rank`` root of WᵀW (None: WᵀW whole); writes metrics.json."""
    X, y, Xt, yt, bounds, n0 = uci_stream(config["dataset"], config["seed"])
    n_stream = len(y) - n0 if config["max_points"] is None else min(config["max_points"], len(y) - n0)
    options = _wiski_options(config["dataset"], config["pretrain_steps"]) | {
        "grid_size": config["grid_size"],
        "wtw_rank": config["wtw_rank"],
        "wtw_update": config["wtw_update"],
    }
    y_stats = (float(y.mean()), float(y.std()))
    gp = make_recorded_model("wiski", X.shape[1], x_bounds=bounds, y_stats=y_stats, seed=config["seed"], **options)
    rows, times = stream_one_at_a_time(
        gp, X, y, Xt, yt, n0, n_stream, config["eval_every"], config["pretrain_steps"], True, "wiski"
    )
    (Path(run_dir) / "metrics.json").write_text(json.dumps(rows, indent=1))
    (Path(run_dir) / "model.json").write_text(json.dumps(model_record(gp), indent=1))
    columns = gp.grid.size if gp.wtw_rank is None else int(gp.wtw_root.shape[1])
    return {**rows[-1], "median_update_s": float(np.median(times)), "root_columns": columns}


@dataclass(frozen=True)
class RankOptions:
    """``onlinegp bench wiski-rank``: the ``dataset``, the ``grid_sizes`` of :data:`RANK_ABLATION`, the root
    ``updates``, the ``ranks`` of the table to run (empty: all of each grid size's; WᵀW whole always runs) and
    ``seeds`` (a split and shuffle each); ``max_points`` cuts the stream (None: all), evaluation every
    ``eval_every`` points, ``pretrain_steps`` on the 5% pre-training batch."""

    dataset: str = option("skillcraft", "UCI set (the paper's: skillcraft)")
    grid_sizes: Sequence[int] = option(
        tuple(RANK_ABLATION), "grid points per dimension: 16 (m = 256), 32 (m = 1024)", parse=comma_ints
    )
    updates: Sequence[str] = option(
        ("gill", "truncate"), "root updates: gill (the paper's), truncate (ours)", parse=comma_items
    )
    ranks: Sequence[int] = option(
        (), "comma-separated ranks r of the paper's table to run (default: all of each grid size's)", parse=comma_ints
    )
    seeds: Sequence[int] = option((0,), "seeds (split and shuffle), e.g. 0-3, 0,3 or 0-2,7", parse=parse_seeds)
    max_points: int | None = option(None, "cut the stream to this many points (default: all)", cli_type=int)
    eval_every: int = option(500, "evaluate on the test set every this many points")
    pretrain_steps: int = option(200, "full-batch steps on the 5% pre-training batch (Table C.1: 200 epochs)")


def rank_specs(options: RankOptions) -> list[RunSpec]:
    """The ablation's runs: per grid size, WᵀW whole and each rank of :data:`RANK_ABLATION` with each root update, per
    seed."""
    o = options
    unknown = sorted(set(o.ranks) - {r for g in o.grid_sizes for r in RANK_ABLATION.get(g, ())})
    if unknown:
        raise ValueError(f"ranks {unknown} are not in the paper's table for grid sizes {list(o.grid_sizes)}")
    specs = []
    for g in o.grid_sizes:
        if g not in RANK_ABLATION:
            raise ValueError(f"grid size {g} is not in the paper's ablation; choose from {sorted(RANK_ABLATION)}")
        ranks = [r for r in RANK_ABLATION[g] if not o.ranks or r in o.ranks]
        # the truncating root of full rank r = m is WᵀW whole, exactly: not run again
        variants = [(None, "whole")] + [
            (r, u) for r in ranks for u in o.updates if not (u == "truncate" and r == g * g)
        ]
        for rank, update in variants:
            for seed in o.seeds:
                config = dict(
                    dataset=o.dataset,
                    grid_size=g,
                    wtw_rank=rank,
                    wtw_update="gill" if rank is None else update,
                    seed=int(seed),
                    max_points=o.max_points,
                    eval_every=o.eval_every,
                    pretrain_steps=o.pretrain_steps,
                )
                specs.append(RunSpec(f"m{g * g}/{'whole' if rank is None else f'r{rank}-{update}'}/seed{seed}", config))
    return specs


def _rank_finals(specs: list, out: Path, values: dict[str, dict]) -> dict[tuple[int, str], list[dict]]:
    """Each run's final metrics row with its seed, median update time and root columns, by (m, root variant)."""
    finals: dict[tuple[int, str], list[dict]] = {}
    for spec in specs:
        path = out / spec.run_id / "metrics.json"
        if path.is_file():
            last = json.loads(path.read_text())[-1]
            key = (spec.config["grid_size"] ** 2, spec.run_id.split("/")[1])
            value = values.get(spec.run_id) or {}
            finals.setdefault(key, []).append(
                {**last, "seed": spec.config["seed"], **{k: value.get(k) for k in ("median_update_s", "root_columns")}}
            )
    return finals


def _rank_order(key: tuple[int, str]) -> tuple:
    """m, then WᵀW whole, then by rank and update."""
    rank, _, update = key[1].removeprefix("r").partition("-")
    return (key[0], -1, "") if key[1] == "whole" else (key[0], int(rank), update)


def _per_seed(rows: list[dict], key: str, fmt: Callable[[float], str]) -> str:
    return " / ".join("" if r.get(key) is None else fmt(r[key]) for r in rows)


def _number(v: float) -> str:
    """3 decimals; a diverged run's value in 2 digits."""
    return f"{v:.3f}" if abs(v) < 1e3 else f"{v:.1e}"


def _rank_table(dataset: str, finals: dict[tuple[int, str], list[dict]]) -> str:
    """table.md: mean ± std over seeds, then every seed's numbers."""
    lines = [
        f"Final test NLL / RMSE on {dataset} (standardised targets), mean ± std over seeds; WISKI learning its own",
        "projection online. r: the rank of the root of WᵀW; 'whole': WᵀW kept itself (exact at every rank).",
        "",
        "| m | root | seeds | NLL | RMSE |",
        "| --- | --- | --- | --- | --- |",
    ]
    ordered = sorted(finals.items(), key=lambda kv: _rank_order(kv[0]))
    for (m, variant), rows in ordered:
        nll, err = (np.array([r[k] for r in rows]) for k in ("nll", "rmse"))
        lines.append(
            f"| {m} | {variant} | {len(rows)} | {nll.mean():.3g} ± {nll.std():.2g} | {_number(err.mean())} ± {_number(err.std())} |"
        )
    lines += [
        "",
        "Every seed (in the order of the seeds column): final test NLL and RMSE, the median update time over the stream",
        "and the root's final number of columns.",
        "",
        "| m | root | seeds | NLL | RMSE | median update (ms) | root columns |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (m, variant), rows in ordered:
        lines.append(
            f"| {m} | {variant} | {_per_seed(rows, 'seed', str)} | {_per_seed(rows, 'nll', _number)} | "
            f"{_per_seed(rows, 'rmse', _number)} | {_per_seed(rows, 'median_update_s', lambda t: f'{1000 * t:.3g}')} | "
            f"{_per_seed(rows, 'root_columns', str)} |"
        )
    return "\n".join(lines) + "\n"


def rank_summarise(out: Path, sweep: SweepResult, options: RankOptions, quiet: bool, log: Echo) -> str:
    """Stanton et al. 2021's root-rank ablation (appendix table: NLL on skillcraft for m = 256 and 1024 against the
    rank r of the root of WᵀW) of the finished runs: the final test NLL and RMSE, the median update time. Writes
    table.md: mean ± std over seeds, then every seed's numbers (a root that diverges on some seeds only shows
    there)."""
    for failed in sweep.failed:
        log(f"run {failed.run_id} failed: {failed.error}")
    values = {r.run_id: r.value for r in sweep.runs if r.status in ("done", "skipped")}
    table = _rank_table(options.dataset, _rank_finals(sweep.specs, out, values))
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(table)
    if not quiet:
        log(table)
    return table


#: the ``onlinegp bench`` commands of this module (:mod:`onlinegp.experiments.bench.protocol`)
BENCHES = {
    "wiski-uci": Bench(
        "wiski-uci",
        UciOptions,
        uci_specs,
        uci_job,
        uci_summarise,
        UCI_SUMMARY,
        threads=1,
        description="Stanton et al. 2021, §5.1: online regression, one point and one step at a time (test NLL, RMSE, "
        "update time).",
    ),
    "wiski-banana": Bench(
        "wiski-banana",
        BananaOptions,
        banana_specs,
        banana_job,
        banana_summarise,
        BANANA_SUMMARY,
        threads=1,
        description="Stanton et al. 2021, §5.2: online Dirichlet classification on banana with WISKI (accuracy, NLL "
        "vs points seen).",
    ),
    "wiski-bo": Bench(
        "wiski-bo",
        BoOptions,
        bo_specs,
        bo_job,
        bo_summarise,
        BO_SUMMARY,
        threads=1,
        description="Stanton et al. 2021, §5.3: batch UCB (q = 3) on noisy 3-D test functions with WISKI and an "
        "exact GP.",
    ),
    "wiski-rank": Bench(
        "wiski-rank",
        RankOptions,
        rank_specs,
        rank_job,
        rank_summarise,
        RANK_SUMMARY,
        threads=1,
        description="Stanton et al. 2021, appendix: WISKI's test NLL against the rank r of its root of WᵀW (m = 256 "
        "and 1024).",
    ),
}
