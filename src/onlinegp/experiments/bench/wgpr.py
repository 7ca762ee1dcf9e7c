"""The experiments of Kepler et al. 2021 (WGPR, §IV): the two-regime toy (Fig. 1), Tables II–III, and models vs ε
(Fig. 2).

Streams (batches of 100, M = 50 pseudo-inputs per sparse model, as the paper):

* ``toy``: 1-D data from two GPs with different hyper-parameters (x < 150: ℓ = 20, σ_f = 0.5; x ≥ 150: ℓ = 5,
  σ_f = 2; noise std 0.25), 3000 points (fewer if ``max_points`` is smaller) in spatial order from x = 0 to 300 (Fig. 1);
* ``kin40k`` and ``pumadyn32nm``: the bundled UCI sets (:mod:`onlinegp.data`), an 80/20 split, the whole training
  split (32 000 and 6 554 rows; at most ``max_points``) and at most ``max_test`` test rows, streamed sorted by the
  first input (the data module's default);
* ``bathymetry``: the stand-in for the paper's lake survey, the bundled topobathy field ('coast':
  :mod:`onlinegp.experiments.simulator.fields`) sampled with noise std 1 along a lawnmower survey (10 lanes) over the task extent,
  12 700 samples (the 127 batches of the paper's Claytor Lake survey; ``max_points`` if fewer), tested on a 50 × 50
  grid of the noise-free field.

Methods: ``lgpr`` (hyper-parameters fitted offline on a random 1000-point subset of the training set; that fit is
included in its training time), ``wgpr``, ``solar-gp`` and ``ovfe`` (a single OSGPR with M = 50). The sparse models
move their pseudo-inputs by gradient with θ on each update's bound, as the paper's (``optimize_inducing``, the
default); ``optimize_inducing=False`` keeps the pivoted-Cholesky Z (a run's config then has no ``optimize_inducing``
key: the runs made before the option existed, which kept Z fixed, are those runs). Every model gets
the same scaling: inputs min–max over the training set, targets standardised with the training mean and std.
Training time is the wall-clock time of the ``update`` calls (plus LGPR's offline fit); RMSE is on the test set
(noisy targets, except the bathymetry grid, which is the truth), in the data's units. The splitting thresholds
(ε, SOLAR's w_gen and ℓ_s, LGPR's w_gen) are per dataset in :data:`SETTINGS`, chosen as the paper did, by hand.

Every run is repeated for each seed (a trial: its own 80/20 split, subsample, toy draw, survey noise and model
seed; default seeds 0-4, the paper's 5 trials), and the tables give mean ± std over the trials. Each run writes
``result.json`` (and the toy's ``toy_predictions.npz``); those (:data:`SUMMARY_FILES`) are kept in
the committed results tree (``results/wgpr/``) by the runner. Outputs in ``out``: config.json, runs.csv (every run), table_time.{md,csv} (Table II), table_rmse.{md,csv}
(Table III), sweep.csv and sweep_<dataset>.png (Fig. 2: RMSE and training rate against the number of models as ε
and w_gen vary), toy.png (Fig. 1) and curves.png (RMSE as batches arrive, Fig. 3).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...io import write_csv
from ..flags import option
from ..protocols import (
    WGPR_BATCH_SIZE,
    WGPR_MODEL_FILE,
    WGPR_NUM_INDUCING,
    WGPR_SETTINGS,
    wgpr_run,
)
from .parse import parse_names, parse_seeds
from .protocol import Bench, Echo
from .runner import RunSpec, SweepResult

DATASETS = ("toy", "kin40k", "pumadyn32nm", "bathymetry")
METHODS = ("lgpr", "wgpr", "solar-gp", "ovfe")
LABELS = {"lgpr": "LGPR", "wgpr": "WGPR", "solar-gp": "SOLAR", "ovfe": "OVFE"}
BATCH_SIZE = WGPR_BATCH_SIZE
NUM_INDUCING = WGPR_NUM_INDUCING
#: training time (s) in Kepler et al. 2021, Table II, of the datasets we run (the lake survey for its stand-in): their
#: machine's seconds, so only the ratios to LGPR carry over (OVFE failed on the lake survey)
PAPER_TRAIN_TIME = {
    "bathymetry": {"lgpr": 39.484, "wgpr": 210.053, "solar-gp": 131.417},
    "kin40k": {"lgpr": 31.221, "wgpr": 202.184, "solar-gp": 119.403, "ovfe": 115.902},
    "pumadyn32nm": {"lgpr": 38.138, "wgpr": 120.836, "solar-gp": 76.353, "ovfe": 45.267},
}
#: a run's files that the tables and figures read (the marker carries the result too)
MODEL_FILE = WGPR_MODEL_FILE  # the options the model ran with (onlinegp.base.model_record)
SUMMARY_FILES = ("result.json", "toy_predictions.npz", MODEL_FILE)


#: per-dataset thresholds: WGPR's ε, SOLAR's (w_gen, ℓ_s), LGPR's w_gen, and the Fig. 2 sweep grids
SETTINGS = WGPR_SETTINGS


# ---------------------------------------------------------------------- one run
def run_job(config: dict, run_dir: Path) -> dict:
    """One stream through one model (a job of :func:`~onlinegp.experiments.bench.runner.run_sweep`;
    :func:`~onlinegp.experiments.protocols.wgpr_run`)."""
    return wgpr_run(config, run_dir)


# ---------------------------------------------------------------------- the experiment
def _param_id(params: dict) -> str:
    return (
        "-".join(f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}" for k, v in sorted(params.items()))
        or "default"
    )


def specs_for(
    datasets: Sequence[str], methods: Sequence[str], sweep: Sequence[str], seeds: Sequence[int], base: dict
) -> list[RunSpec]:
    """Table runs (every dataset × method at its settings) and Fig. 2 runs (on ``sweep``: WGPR's ε grid and SOLAR's
    w_gen grid, each where its method is among ``methods``), each once per seed (a trial: its own split, subsample
    and model seed)."""
    specs: dict[str, RunSpec] = {}

    def add(dataset: str, method: str, params: dict) -> None:
        params = {k: "inf" if v == math.inf else v for k, v in params.items()}  # JSON has no infinity
        for seed in seeds:
            run_id = f"{dataset}/{method}/{_param_id(params)}/seed-{seed}"
            config = {**base, "seed": int(seed), "dataset": dataset, "method": method, "params": params}
            specs.setdefault(run_id, RunSpec(run_id, config))

    for d in datasets:
        for m in methods:
            add(d, m, dict(SETTINGS[d].get(m, {})))
    for d in sweep:
        for eps in SETTINGS[d]["eps_grid"] if "wgpr" in methods else ():
            add(d, "wgpr", {"epsilon": eps})
        for w in SETTINGS[d]["wgen_grid"] if "solar-gp" in methods else ():
            add(d, "solar-gp", {**SETTINGS[d]["solar-gp"], "w_gen": w})
    return list(specs.values())


def table_groups(results: Sequence[dict]) -> dict[tuple[str, str], list[dict]]:
    """The table runs (each dataset's methods at their settings in :data:`SETTINGS`), grouped by (dataset, method)
    over trials."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in results:
        if r["params"] == dict(SETTINGS[r["dataset"]].get(r["method"], {})):
            groups.setdefault((r["dataset"], r["method"]), []).append(r)
    return groups


def _mean_std(values: Sequence[float], digits: int) -> str:
    """'mean ± std' (numpy's std, ddof = 0) over trials; the mean alone for one trial."""
    a = np.asarray(values, dtype=np.float64)
    return f"{a.mean():.{digits}f}" + (f" ± {a.std():.{digits}f}" if len(a) > 1 else "")


def write_tables(results: Sequence[dict], datasets: Sequence[str], methods: Sequence[str], out: Path) -> dict[str, str]:
    """Tables II (training time, s) and III (RMSE) as Markdown and CSV: mean ± std (numpy's, ddof = 0) over the
    trials, the mean number of models in brackets, '-' where every trial failed."""
    groups = table_groups(results)
    trials = sorted({len(runs) for runs in groups.values()})
    texts = {}
    for key, title, digits in (("train_time", "Training time (s)", 2), ("rmse", "RMSE", 3)):
        rows = []
        for m in methods:
            row = {"method": LABELS[m]}
            for d in datasets:
                runs = groups.get((d, m), [])
                if not runs:
                    row[d] = "-"
                    continue
                row[d] = _mean_std([r[key] for r in runs], digits)
                if m in ("wgpr", "solar-gp", "lgpr"):
                    row[d] += f" ({np.mean([r['num_models'] for r in runs]):.3g})"
            rows.append(row)
        name = "table_time" if key == "train_time" else "table_rmse"
        write_csv(out / f"{name}.csv", rows, ["method", *datasets])
        lines = [f"| {title} | " + " | ".join(datasets) + " |", "|---" * (len(datasets) + 1) + "|"]
        lines += ["| " + " | ".join([row["method"], *(row[d] for d in datasets)]) + " |" for row in rows]
        count = " or ".join(str(n) for n in trials) or "0"
        texts[name] = "\n".join(lines) + f"\n\n(mean ± std over {count} trials; mean number of models in brackets)\n"
        (out / f"{name}.md").write_text(texts[name])
    texts["table_ratio"] = ratio_table(groups, datasets, methods)
    (out / "table_ratio.md").write_text(texts["table_ratio"])
    texts["table_phases"] = phase_table(groups, datasets, methods)
    (out / "table_phases.md").write_text(texts["table_phases"])
    return texts


def phase_table(groups: dict, datasets: Sequence[str], methods: Sequence[str]) -> str:
    """Where each method's training time goes: the mean seconds and share of every phase its updates time
    (``UpdateReport.timings``), over the runs that recorded them, and the rest (LGPR's offline fit of θ, the calls'
    own overhead)."""
    lines = [
        "| dataset | method | training time (s) | phases: mean s (share of the training time) |",
        "|---|---|---|---|",
    ]
    for d in datasets:
        for m in methods:
            runs = [r for r in groups.get((d, m), []) if r.get("phase_time")]
            if not runs:
                continue
            total = float(np.mean([r["train_time"] for r in runs]))
            names = sorted({k for r in runs for k in r["phase_time"]})
            phases = {k: float(np.mean([r["phase_time"].get(k, 0.0) for r in runs])) for k in names}
            phases["rest"] = total - sum(phases.values())
            cells = ", ".join(
                f"{k} {v:.1f} ({v / total:.0%})" for k, v in sorted(phases.items(), key=lambda kv: -kv[1])
            )
            lines.append(f"| {d} | {LABELS[m]} | {total:.1f} | {cells} |")
    return (
        "\n".join(lines)
        + "\n\n(means over the trials that recorded their phases; 'health': the checks of onlinegp.health;"
        " WGPR's 'candidates' are the J′ nearest members' updates on copies (their own checks included), 'fresh' the new"
        " member fitted on the batch, 'wasserstein' the scores of Eq. 6; 'rest': the training time outside the updates'"
        " phases, LGPR's offline fit of θ among it)\n"
    )


def _ratio(runs: Sequence[dict], base: Sequence[dict], key: str) -> str:
    """The mean of ``key`` over ``runs`` divided by its mean over ``base``; '-' where a run lacks it."""
    if not base or not all(key in r for r in [*runs, *base]):
        return "-"
    return f"{np.mean([r[key] for r in runs]) / np.mean([r[key] for r in base]):.1f}"


def _health_share(runs: Sequence[dict]) -> str:
    """The share of the training time spent in the updates' health checks, over the runs that recorded their phases;
    '-' where none did."""
    runs = [r for r in runs if "health" in r.get("phase_time", {})]
    if not runs:
        return "-"
    return f"{sum(r['phase_time']['health'] for r in runs) / sum(r['train_time'] for r in runs):.0%}"


def _ratio_unchecked(runs: Sequence[dict], base: Sequence[dict]) -> str:
    """:func:`_ratio` of the training times less the health checks' (the paper's methods ran none), over the runs
    that recorded their phases; '-' where none did."""
    runs, base = (
        [{"t": r["train_time"] - r["phase_time"]["health"]} for r in rs if "health" in r.get("phase_time", {})]
        for rs in (runs, base)
    )
    return _ratio(runs, base, "t") if runs else "-"


def ratio_table(groups: dict, datasets: Sequence[str], methods: Sequence[str]) -> str:
    """Each method's mean training time over LGPR's in the same sweep (wall, and CPU where every run recorded it),
    beside the ratio in Kepler et al. 2021, Table II (:data:`PAPER_TRAIN_TIME`)."""
    lines = [
        "| dataset | method | time / LGPR's | CPU time / LGPR's | time / LGPR's, health checks left out | paper's ratio "
        "| 1-min load around the runs | health checks' share of the time: the method's, LGPR's |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for d in datasets:
        base, paper = groups.get((d, "lgpr"), []), PAPER_TRAIN_TIME.get(d, {})
        for m in (m for m in methods if m != "lgpr" and groups.get((d, m))):
            runs = groups[(d, m)]
            theirs = f"{paper[m] / paper['lgpr']:.1f}" if m in paper and "lgpr" in paper else "-"
            loads = [x for r in [*runs, *base] for x in r.get("load_average", [])]
            load = f"{min(loads):.1f}-{max(loads):.1f}" if loads else "-"
            lines.append(
                f"| {d} | {LABELS[m]} | {_ratio(runs, base, 'train_time')} | {_ratio(runs, base, 'cpu_time')} "
                f"| {_ratio_unchecked(runs, base)} | {theirs} | {load} | {_health_share(runs)}, {_health_share(base)} |"
            )
    return (
        "\n".join(lines) + "\n\n(means over the trials; '-' where a run did not record the figure: runs kept before CPU"
        " time, the load or the phases were recorded; the load column spans the method's and LGPR's runs; the health"
        " checks predict each batch before and after it is absorbed (onlinegp.health), their share is over the runs"
        " that recorded their phases)\n"
    )


def sweep_table(rows: Sequence[dict]) -> str:
    """Fig. 2 in numbers: per dataset, method and threshold of the sweep runs, the number of models, the RMSE and the
    training rate (samples/s), each the mean ± std over the trials."""

    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["dataset"], r["method"], _param_id(r["params"])), []).append(r)
    lines = [
        "| dataset | method | threshold | trials | models | RMSE | training rate (samples/s) |",
        "|---|---|---|---|---|---|---|",
    ]
    by_size = sorted(groups.items(), key=lambda g: (g[0][:2], np.mean([r["num_models"] for r in g[1]])))
    for (dataset, method, params), runs in by_size:
        lines.append(
            f"| {dataset} | {LABELS[method]} | {params} | {len(runs)} | {_mean_std([r['num_models'] for r in runs], 1)} "
            f"| {_mean_std([r['rmse'] for r in runs], 3)} | {_mean_std([r['rate'] for r in runs], 1)} |"
        )
    return "\n".join(lines) + "\n"


def mean_curves(results: Sequence[dict]) -> list[dict]:
    """Fig. 3's curves of the table runs: test RMSE at each checkpoint averaged over the trials that reached it."""
    rows = []
    for (dataset, method), runs in table_groups(results).items():
        at: dict[int, list[float]] = {}
        for r in runs:
            for point in r["curve"]:
                at.setdefault(point["num_data"], []).append(point["rmse"])
        curve = [{"num_data": n, "rmse": float(np.mean(v))} for n, v in sorted(at.items())]
        rows.append({"dataset": dataset, "method": method, "curve": curve})
    return rows


#: runs.csv's columns: every run's numbers
RUNS_COLUMNS = [
    "dataset",
    "method",
    "params",
    "seed",
    "num_models",
    "rmse",
    "rmse_f",
    "train_time",
    "cpu_time",
    "pretrain_time",
    "rate",
    "num_train",
    "num_batches",
    "failed_updates",
]


def _check_choices(
    datasets: Sequence[str], methods: Sequence[str], sweep: Sequence[str], max_points: int | None, max_test: int
) -> None:
    for name in [*datasets, *sweep]:
        if name not in SETTINGS:
            raise ValueError(f"unknown dataset {name!r}: choose from {', '.join(DATASETS)}")
    for name in methods:
        if name not in METHODS:
            raise ValueError(f"unknown method {name!r}: choose from {', '.join(METHODS)}")
    if (max_points is not None and max_points < BATCH_SIZE) or max_test < 1:
        raise ValueError(f"max_points must be at least one batch ({BATCH_SIZE}) and max_test positive")


def write_figures(
    results: Sequence[dict],
    datasets: Sequence[str],
    methods: Sequence[str],
    sweep: Sequence[str],
    seeds: Sequence[int],
    out: Path,
) -> dict[str, Path]:
    """sweep.csv, sweep.md (:func:`sweep_table`) and the figures of those runs that finished: Fig. 2 per ``sweep``
    dataset (sweep_<dataset>.png), the toy's ensembles of the first seed (Fig. 1, toy.png) and the mean RMSE curves
    (Fig. 3, curves.png)."""
    from ..plots import plot_models_tradeoff, plot_rmse_curves, plot_toy_ensembles

    figures = {}
    sweep_rows = [r for r in results if r["dataset"] in sweep and r["method"] in ("wgpr", "solar-gp")]
    write_csv(out / "sweep.csv", sweep_rows, ["dataset", "method", "params", "num_models", "rmse", "rate"])
    (out / "sweep.md").write_text(sweep_table(sweep_rows))
    for d in sweep:
        rows = [r for r in sweep_rows if r["dataset"] == d]
        if rows:
            figures[f"sweep_{d}"] = plot_models_tradeoff(rows, out / f"sweep_{d}.png", title=d)
    toy_dirs = {
        LABELS[m]: out / "runs" / "toy" / m / _param_id(dict(SETTINGS["toy"].get(m, {}))) / f"seed-{seeds[0]}"
        for m in ("wgpr", "solar-gp")
        if "toy" in datasets and m in methods
    }
    toy_dirs = {k: v / "toy_predictions.npz" for k, v in toy_dirs.items() if (v / "toy_predictions.npz").exists()}
    if toy_dirs:
        figures["toy"] = plot_toy_ensembles({k: dict(np.load(v)) for k, v in toy_dirs.items()}, out / "toy.png")
    curves = mean_curves(results)
    if curves:
        figures["curves"] = plot_rmse_curves(curves, out / "curves.png", labels=LABELS)
    return figures


@dataclass(frozen=True)
class WgprOptions:
    """``onlinegp bench wgpr``: datasets, methods, the datasets of the models-vs-threshold sweep (Fig. 2: the grids of
    WGPR and SOLAR-GP, those of them among ``methods``) and the
    seeds (lists, or text such as ``"toy,kin40k"`` and ``"0-4"``); ``max_points`` cuts every stream (None: the
    paper's sizes), ``max_test`` test points per UCI dataset, ``member_steps`` L-BFGS iterations per OSGPR update
    (None: 200), ``member_tolerance`` every OSGPR's ``training.tolerance`` (None: the models' default, 1e-3 since 0.7.4,
    WGPR's members' since 0.7.3; 0: the whole budget for every model); ``optimize_inducing`` moves the sparse models' pseudo-inputs with θ (one ``out`` holds one choice:
    the runs of both share their ids)."""

    datasets: str | Sequence[str] = option(DATASETS, "comma-separated")
    methods: str | Sequence[str] = option(METHODS, "comma-separated")
    sweep: str | Sequence[str] = option(
        ("kin40k",),
        "datasets for the models-vs-threshold sweep (Fig. 2: the grids of WGPR and SOLAR-GP among --methods); '' for "
        "none",
    )
    max_points: int | None = option(
        None, "cut every stream to this many points (default: the paper's sizes, see the docs)", cli_type=int
    )
    max_test: int = option(2000, "test points per UCI dataset")
    member_steps: int | None = option(None, "L-BFGS iterations per OSGPR update (default 200)", cli_type=int)
    member_tolerance: float | None = option(
        None,
        "end each OSGPR fit once its bound per point settles to this change per iteration, e.g. 1e-5; 0 runs the "
        "whole L-BFGS budget (default: the models' own, 1e-3)",
        cli_type=float,
    )
    optimize_inducing: bool = option(
        True,
        "move the sparse models' pseudo-inputs with θ, as the paper (default), or keep the pivoted-Cholesky Z",
        "--optimize-inducing/--fixed-inducing",
    )
    seeds: str | Sequence[int] = option("0-4", "trials (split, subsample and model seed), e.g. 0-4 or 0,3")

    def parsed(self) -> tuple[list[str], list[str], list[str], list[int]]:
        """Datasets, methods, sweep datasets and seeds as lists, checked."""
        datasets, methods = parse_names(self.datasets, "dataset"), parse_names(self.methods, "method")
        sweep = parse_names(self.sweep, "dataset") if self.sweep else []
        _check_choices(datasets, methods, sweep, self.max_points, self.max_test)
        return datasets, methods, sweep, parse_seeds(self.seeds)

    def base(self) -> dict[str, Any]:
        """What every run's config shares."""
        return {
            "max_points": None if self.max_points is None else int(self.max_points),
            "max_test": int(self.max_test),
            "batch_size": BATCH_SIZE,
            "member_steps": self.member_steps,
            **({"optimize_inducing": True} if self.optimize_inducing else {}),
            **self.member_options(),
        }

    def member_options(self) -> dict[str, Any]:
        """The config's ``member_options``, only when an option sets them (so the keys of other runs stay as they
        were): ``member_tolerance`` as every OSGPR's ``training.tolerance``."""
        if self.member_tolerance is None:
            return {}
        if not self.member_tolerance >= 0:
            raise ValueError(f"member_tolerance must be >= 0 (0: the whole budget), got {self.member_tolerance!r}")
        return {"member_options": {"training": {"tolerance": float(self.member_tolerance)}}}


def specs(options: WgprOptions) -> list[RunSpec]:
    """The table and Fig. 2 runs of :func:`specs_for`."""
    datasets, methods, sweep, seeds = options.parsed()
    return specs_for(datasets, methods, sweep, seeds, options.base())


def summarise(out: Path, sweep_result: SweepResult, options: WgprOptions, quiet: bool, log: Echo) -> dict[str, Any]:
    """config.json, runs.csv, the tables and figures of the finished runs; returns the tables' Markdown and the paths
    written."""
    datasets, methods, sweep, seeds = options.parsed()
    (out / "config.json").write_text(
        json.dumps(
            {
                "datasets": datasets,
                "methods": methods,
                "sweep": sweep,
                "seeds": seeds,
                **options.base(),
                "num_inducing": NUM_INDUCING,
                "settings": SETTINGS,
            },
            indent=1,
            default=str,
        )
    )
    results = [r.value for r in sweep_result.runs if r.status in ("done", "skipped") and r.value]
    write_csv(out / "runs.csv", results, RUNS_COLUMNS)
    texts = write_tables(results, datasets, methods, out)
    figures = write_figures(results, datasets, methods, sweep, seeds, out)
    failed = [(r.run_id, r.error) for r in sweep_result.failed]
    return {
        "tables": texts,
        "figures": {k: str(v) for k, v in figures.items()},
        "failed": failed,
        "out": str(out),
        "results": None if sweep_result.results is None else str(sweep_result.results),
        "restored": sum(r.restored for r in sweep_result.runs),
    }


def show(result: dict[str, Any], quiet: bool, echo: Callable[..., Any]) -> int:
    """What ``onlinegp bench wgpr`` prints of :func:`summarise`'s result (its tables, where they went; the failed
    runs, to stderr); exit 1 if any run failed."""
    if not quiet:
        for text in result["tables"].values():
            echo(text)
        echo(f"written to {result['out']}")
        if result["results"] is not None:
            echo(f"run summaries kept in {result['results']} ({result['restored']} restored from there)")
    if result["failed"]:
        echo(f"{len(result['failed'])} run(s) failed: " + ", ".join(r for r, _ in result["failed"]), err=True)
        return 1
    return 0


#: the ``onlinegp bench`` command of this module (:mod:`onlinegp.experiments.bench.protocol`)
BENCHES = {
    "wgpr": Bench(
        "wgpr",
        WgprOptions,
        specs,
        run_job,
        summarise,
        SUMMARY_FILES,
        runs="runs",
        show=show,
        description="Kepler et al. 2021 (WGPR): two-regime toy, Tables II-III (time, RMSE) and RMSE/rate vs number of "
        "models (Fig. 2).",
    )
}
