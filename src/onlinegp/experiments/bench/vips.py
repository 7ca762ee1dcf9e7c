"""The benchmarks of Pescador-Barrios et al. 2024: Table 1 / Figs. 3 and 6 (UCI streams) and §5.4 / Figs. 4, 7-9
(magnetic field).

``vips-table1`` (:class:`Table1Options`): exact GP, Conditional Variance, OIPS and VIPS (all but the exact GP are OSGPR
with that selector, θ by L-BFGS on the online bound) on UCI sets sorted by the first input, 20 batches below 12 000
points and 50 above, over 80/20 splits; isotropic SE kernel with length-scale and variance 1, noise 0.1, standardised
data (appendix F.3 and the paper's code). The exact GP is refitted at the first, middle and last batch (as Fig. 3).
Writes ``table.md``/``table.csv`` (M, RMSE, NLPD at the last batch: mean (std) over splits), ``results.json`` and
``curves.png`` (M, RMSE, NLPD against N). A run's :data:`TABLE1_SUMMARY` files are all the table reads, and what the
runner keeps in the committed results tree (``results/vips-table1/``).

``vips-magnetic`` (:class:`MagneticOptions`): (1) trajectories 1, 2, 4, 5 of the magnetometer survey as one batch each,
field maps after each path (mean, marginal variance as opacity); (2) trajectory 3 in 20 batches with VIPS and
Conditional Variance (η = 2.2), M per batch and the final maps. Kernel: constant + Matérn-3/2.

``vips-synthetic`` (:class:`SyntheticOptions`): §5.1 / Fig. 1 (M chosen by VIPS on synthetic sets 1-3, appendix F.1) and
§5.2 / Fig. 2a (fixed M = 10, 20, 30 against VIPS and the exact GP, appendix F.2.1), in data units; writes
``synthetic.csv``, ``fig1.png``, ``fig2a.png`` and ``table.md``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gpytorch
import numpy as np
import torch

from ...base import OnlineGP
from ...data import ORDERS, Dataset, batch_indices, load_dataset, synthetic_function
from ...io import write_csv
from ...metrics import nlpd, rmse
from ...models.registry import make_model
from ..flags import option
from ..protocols import lbfgs_exact_gp
from ..stream import StreamConfig, run_stream
from .parse import comma_ints, comma_items, parse_seeds
from .protocol import Bench, Echo
from .runner import RunSpec, SweepResult

#: label in tables -> registered model
METHODS = {"exact": "exact", "cv": "conditional-variance", "oips": "oips", "vips": "vips"}
LABELS = {"exact": "Exact GP", "cv": "Cond. Variance", "oips": "OIPS", "vips": "VIPS"}
TABLE1_DATASETS = ("concrete", "skillcraft", "elevators", "bike", "kin40k", "pumadyn32nm")
#: appendix F.3: SE kernel, hyper-parameters initialised to 1, noise variance 0.1
PAPER_OPTIONS = {"kernel_options": {"lengthscale": 1.0, "ard": False}, "noise": 0.1}
#: appendix F.3 and the authors' code put no prior on the length-scale (the library has one above three inputs)
NO_PRIOR = {"lengthscale_prior": None}
#: the online methods fit θ at the selected Z, as OSGPR does in Bui et al. 2017 (not our default: see OSGPR)
PAPER_ONLINE_OPTIONS = {"fit_inducing": "selected"}
#: a Table 1 run's files that the table reads (kept in the results tree; not its figure)
TABLE1_SUMMARY = ("config.json", "metrics.json", "metrics.csv")


def table1_job(config: dict, run_dir: Path) -> dict:
    """One (dataset, method, split) stream; the runner's job function."""
    rows = run_stream(StreamConfig(**config), out=run_dir, quiet=True)
    return {k: rows[-1][k] for k in ("num_data", "num_inducing", "rmse", "nlpd")}


@dataclass(frozen=True)
class Table1Options:
    """``onlinegp bench vips-table1``: datasets, methods (keys of :data:`METHODS`) and 80/20 splits. ``max_size``
    subsamples each dataset first so it runs in minutes; ``batches`` overrides the dataset's 20/50; the exact GP is
    skipped above ``exact_max`` training points; ``num_steps`` caps L-BFGS iterations per batch; ``ard`` gives every
    input its own length-scale and ``lengthscale`` is its initial value (the paper: one shared length-scale starting
    at 1; pumadyn32nm, with few relevant inputs among 32, needs ARD started near √32, else L-BFGS stays where every
    point is independent and predicts the mean). ``lengthscale_prior`` keeps the library's log-normal length-scale
    prior above three inputs (:func:`~onlinegp.kernels.default_lengthscale_prior`; the paper and its code have none,
    and the runs made before this option existed had it). ``split``: 'random' 80/20 splits (the paper's text) or
    'chunked', the folds of sorted chunks of the authors' code (:func:`~onlinegp.data.chunked_fold_split`).
    ``row_index``: the row's index in the bundled file as the first input (the authors' elevators and bike files,
    whose rows are ours in the same order: 'sorted by the first input' then streams file order, and the index is
    one more input of the kernel). ``order``: the training part's order, 'sorted' by the first input (the paper's
    text) or any order of :func:`~onlinegp.data.order_indices` ('given': the file's, which is the authors' stream
    without their index as an input)."""

    datasets: Sequence[str] = option(TABLE1_DATASETS, "comma-separated UCI sets", parse=comma_items)
    methods: Sequence[str] = option(tuple(METHODS), "comma-separated: exact, cv, oips, vips", parse=comma_items)
    splits: int = option(5, "number of 80/20 splits (seeds 0..splits-1)")
    max_size: int | None = option(None, "subsample each dataset to this many rows (fast runs)", cli_type=int)
    batches: int | None = option(None, "override the 20 (<12000 points) / 50 batches", cli_type=int)
    exact_max: int = option(6000, "skip the exact GP above this many training points")
    num_steps: int | None = option(None, "cap L-BFGS iterations per batch (default 200)", cli_type=int)
    ard: bool = option(False, "one length-scale per input (Pescador-Barrios et al. 2024: shared)")
    lengthscale: float = option(1.0, "initial length-scale in standard deviations (Pescador-Barrios et al. 2024: 1)")
    lengthscale_prior: bool = option(
        False,
        "the library's log-normal length-scale prior above 3 inputs (Pescador-Barrios et al. 2024: none)",
        "--lengthscale-prior/--no-lengthscale-prior",
    )
    split: str = option(
        "random",
        "random 80/20 splits (Pescador-Barrios et al. 2024's text) or chunked: the folds of sorted chunks of the "
        "authors' code",
    )
    row_index: bool = option(
        False,
        "the row's index in the file as the first input, as the authors' elevators and bike files: the stream is "
        "then in file order",
    )
    order: str = option(
        "sorted",
        "the training stream's order: sorted by the first input (Pescador-Barrios et al. 2024's text), given (the "
        "file's: the authors' stream without their index as an input) or random",
    )


def table1_specs(options: Table1Options) -> list[RunSpec]:
    """A run per (dataset, method, split); the exact GP's where the training set fits ``exact_max``."""
    o = options
    if o.split not in ("random", "chunked"):
        raise ValueError(f"split must be 'random' or 'chunked', got {o.split!r}")
    if o.order not in ORDERS or (o.split == "chunked" and o.order != "sorted"):
        raise ValueError(f"order must be one of {', '.join(ORDERS)} ('sorted' with split='chunked'), got {o.order!r}")
    specs = []
    for name in o.datasets:
        n = len(load_dataset(name)) if o.max_size is None else min(o.max_size, len(load_dataset(name)))
        for method in o.methods:
            if method not in METHODS:
                raise ValueError(f"unknown method {method!r}: choose from {', '.join(METHODS)}")
            if method == "exact" and 0.8 * n > o.exact_max:
                continue
            kernel = {"lengthscale": o.lengthscale, "ard": o.ard} | ({} if o.lengthscale_prior else NO_PRIOR)
            options = {**PAPER_OPTIONS, "kernel_options": kernel}
            if method != "exact":
                options.update(PAPER_ONLINE_OPTIONS)
                if o.num_steps is not None:
                    options["num_steps"] = o.num_steps
            for split in range(o.splits):
                config = StreamConfig(
                    dataset=name,
                    model=METHODS[method],
                    batches=o.batches,
                    order=o.order,
                    seed=split,
                    max_size=o.max_size,
                    options=options,
                    split=o.split,
                    dataset_options={"row_index": True} if o.row_index else {},
                )
                if method == "exact":
                    k = o.batches or load_dataset(name).default_batches
                    config.eval_batches = sorted({1, max(k // 2, 1), k})
                specs.append(RunSpec(f"{name}/{method}/split{split}", config.to_json()))
    return specs


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=np.float64)
    return float(a.mean()), float(a.std())


def summarise_table1(root: Path, specs: Sequence[RunSpec]) -> dict:
    """Per dataset and method: last-batch M, RMSE, NLPD (mean, std over splits) and the curves against N."""
    runs: dict[tuple[str, str], list[list[dict]]] = {}
    for spec in specs:
        path = root / spec.run_id / "metrics.json"
        if path.is_file():
            name, method, _ = spec.run_id.split("/")
            runs.setdefault((name, method), []).append(json.loads(path.read_text()))
    summary: dict[str, dict[str, dict]] = {}
    for (name, method), split_rows in runs.items():
        scored = [[r for r in rows if "rmse" in r] for rows in split_rows]
        length = min(len(s) for s in scored)
        curve = {"N": [s["num_data"] for s in scored[0][:length]]}
        for key in ("num_inducing", "rmse", "nlpd", "update_time"):
            values = np.array([[r[key] for r in s[:length]] for s in scored], dtype=np.float64)
            curve[key] = {"mean": values.mean(0).tolist(), "std": values.std(0).tolist()}
        last = {key: _mean_std([s[length - 1][key] for s in scored]) for key in ("num_inducing", "rmse", "nlpd")}
        summary.setdefault(name, {})[method] = {"splits": len(scored), "last": last, "curve": curve}
    return summary


def _fmt(mean: float, std: float, integer: bool = False) -> str:
    if integer:
        return f"{mean:.0f} ({std:.0f})"
    return f"{mean:.2f} ({std:.2f})"


def write_table1(root: Path, summary: dict, methods: Sequence[str]) -> str:
    """table.md (Markdown, like Table 1 of Pescador-Barrios et al. 2024 plus NLPD), table.csv and results.json; returns
    the Markdown."""
    from ..plots import plot_sweep_curves

    header = ["Dataset"] + [
        f"{LABELS[m]} {k}" for m in methods for k in (("RMSE", "NLPD") if m == "exact" else ("M", "RMSE", "NLPD"))
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    csv_rows = []
    for name, by_method in summary.items():
        cells = [name]
        for m in methods:
            last = by_method.get(m, {}).get("last")
            keys = ("rmse", "nlpd") if m == "exact" else ("num_inducing", "rmse", "nlpd")
            for k in keys:
                cells.append("–" if last is None else _fmt(*last[k], integer=k == "num_inducing"))
                if last is not None:
                    csv_rows.append(
                        {
                            "dataset": name,
                            "method": m,
                            "metric": k,
                            "mean": last[k][0],
                            "std": last[k][1],
                            "splits": by_method[m]["splits"],
                        }
                    )
        lines.append("| " + " | ".join(cells) + " |")
    table = "\n".join(lines) + "\n"
    (root / "table.md").write_text(
        "Mean (std) over splits at the last batch; RMSE and NLPD in standardised target units.\n\n" + table
    )
    write_csv(root / "table.csv", csv_rows, ["dataset", "method", "metric", "mean", "std", "splits"])
    (root / "results.json").write_text(json.dumps(summary, indent=1))
    panels: dict[tuple[str, str], dict[str, dict]] = {}
    for name, by_method in summary.items():
        for key, label in (("num_inducing", "M"), ("rmse", "RMSE"), ("nlpd", "NLPD")):
            for m, res in by_method.items():
                if m == "exact" and key == "num_inducing":
                    continue
                c = res["curve"]
                panels.setdefault((label, name), {})[LABELS[m]] = {
                    "samples": c["N"],
                    "mean": c[key]["mean"],
                    "std": c[key]["std"],
                }
    if panels:
        plot_sweep_curves(
            panels, root / "curves.png", title="Pescador-Barrios et al. 2024, Figs. 3/6: M, RMSE, NLPD against N"
        )
    return table


def table1_summarise(root: Path, sweep: SweepResult, options: Table1Options, quiet: bool, log: Echo) -> str:
    """Pescador-Barrios et al. 2024, Table 1 (+ NLPD, Figs. 3/6) of the finished runs; returns the Markdown."""
    for failed in sweep.failed:
        log(f"run {failed.run_id} failed: {failed.error}")
    table = write_table1(root, summarise_table1(root, sweep.specs), options.methods)
    if not quiet:
        log(table)
        log(f"wrote {root / 'table.md'}, {root / 'table.csv'}, {root / 'curves.png'}")
        _log_kept(sweep, log)
    return table


def _log_kept(sweep: SweepResult, log: Echo) -> None:
    if sweep.results is not None:
        restored = sum(r.restored for r in sweep.runs)
        log(f"run summaries kept in {sweep.results} ({restored} of {len(sweep.runs)} restored from there)")


# ------------------------------------------------------------------------------------------------ magnetic field
def magnetic_kernel(dtype: torch.dtype = torch.float64) -> gpytorch.kernels.Kernel:
    """Chang et al.'s magnetic-field prior: a constant (offset) kernel plus a scaled Matérn-3/2."""
    matern = gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(nu=1.5))
    matern.base_kernel.lengthscale = 0.2
    return (gpytorch.kernels.ConstantKernel() + matern).to(dtype)


def _maps(model, extent: Sequence[float], size: int) -> dict:
    gx, gy = np.meshgrid(np.linspace(extent[0], extent[1], size), np.linspace(extent[2], extent[3], size))
    pred = model.predict(np.column_stack([gx.ravel(), gy.ravel()]))
    return {"mean": pred.mean.numpy().reshape(size, size), "var": pred.var_f.numpy().reshape(size, size)}


#: a magnetic run's files that the summary table and the M-per-batch figure read (kept in the results tree,
#: ``results/vips-magnetic/``; not the maps, which need the model)
MAGNETIC_SUMMARY = ("metrics.json", "metrics.csv")
MAGNETIC_COLUMNS = ("batch", "num_data", "num_inducing", "rmse", "nlpd", "update_time")


def magnetic_job(config: dict, run_dir: Path) -> dict:
    """One stream of ``vips-magnetic`` (``config``: its trajectories, model, options, batches, thinning, L-BFGS cap
    and map grid); the runner's job function. Writes the stream's files and ``maps.png`` (field maps at the snapshot
    batches) to ``run_dir`` and returns the last batch's M, RMSE and NLPD."""
    from ..plots import plot_uncertain_maps

    full = load_dataset("magnetic")
    extent = [full.X[:, 0].min(), full.X[:, 0].max(), full.X[:, 1].min(), full.X[:, 1].max()]
    trajectories, n_batches, grid = config["trajectories"], config["batches"], config["grid"]
    options: dict[str, Any] = {"noise": 0.1, **PAPER_ONLINE_OPTIONS, "kernel": magnetic_kernel(), **config["options"]}
    if config["num_steps"] is not None:
        options["num_steps"] = config["num_steps"]
    if "eta" in options:
        # η is a trace of kernel values, so it carries the target units: the paper's 2.2 is in μT², the models here
        # work with standardised targets (minmax scaling standardises y with the training statistics)
        options["eta"] = options["eta"] / float(np.var(load_dataset("magnetic", trajectories=[3]).y))
    n = len(load_dataset("magnetic", trajectories=trajectories))
    stream = StreamConfig(
        "magnetic",
        config["model"],
        batches=None if n_batches == "groups" else n_batches,
        order="time",
        max_size=n // config["thin"],
        test_fraction=0.1,
        scaling="minmax",
        options=options,
        dataset_options={"trajectories": trajectories},
    )
    total = len(trajectories) if n_batches == "groups" else n_batches
    shown = set(range(1, total + 1)) if n_batches == "groups" else {1, total // 4, total // 2, 3 * total // 4, total}
    frames: list[dict] = []
    paths: list[np.ndarray] = []

    def keep(row: dict, m: Any, batch_x: np.ndarray) -> None:
        paths.append(batch_x)
        if row["batch"] in shown:
            frames.append(
                {
                    **_maps(m, extent, grid),
                    "path": np.concatenate(paths),
                    "new": batch_x,
                    "title": f"{config['tag']}: after batch {row['batch']} (M = {row['num_inducing']})",
                }
            )

    rows = run_stream(stream, out=run_dir, quiet=True, on_batch=keep)
    plot_uncertain_maps(frames, extent, run_dir / "maps.png")
    return {k: rows[-1][k] for k in ("num_data", "num_inducing", "rmse", "nlpd")}


@dataclass(frozen=True)
class MagneticOptions:
    """``onlinegp bench vips-magnetic``: ``thin`` keeps every ``thin``-th reading (random subset of that size, in time
    order) so the runs fit a laptop; trajectory 3 in ``batches`` batches; the Conditional Variance's ``eta`` in μT²
    (as the paper's 2.2; divided by the variance of the field strength for the scaled model) and VIPS's ``delta``;
    ``num_steps`` caps L-BFGS iterations per batch; the maps' ``grid`` points per side."""

    thin: int = option(10, "keep one reading in this many (the survey has ~9000 per path)")
    batches: int = option(20, "batches for trajectory 3")
    eta: float = option(2.2, "Conditional Variance tolerance (Pescador-Barrios et al. 2024: 2.2)")
    delta: float = option(0.05, "VIPS tolerance")
    num_steps: int | None = option(None, "cap L-BFGS iterations per batch", cli_type=int)
    grid: int = 60


def magnetic_specs(options: MagneticOptions) -> list[RunSpec]:
    """Trajectories 1, 2, 4, 5 one batch each with VIPS; trajectory 3 in ``batches`` batches with VIPS and with the
    Conditional Variance (``eta`` in μT²)."""
    o = options
    common = {"thin": o.thin, "num_steps": o.num_steps, "grid": o.grid}
    runs = (
        ("paths-vips", [1, 2, 4, 5], "vips", {"delta": o.delta}, "groups"),
        ("trajectory3-vips", [3], "vips", {"delta": o.delta}, o.batches),
        ("trajectory3-cv", [3], "conditional-variance", {"eta": o.eta}, o.batches),
    )
    return [
        RunSpec(tag, {"tag": tag, "trajectories": t, "model": m, "options": opts, "batches": b, **common})
        for tag, t, m, opts, b in runs
    ]


def magnetic_table(results: dict) -> str:
    """Markdown: M, RMSE and NLPD (standardised targets, held-out 10%) after each path, and after every fifth batch of
    trajectory 3 for VIPS and the Conditional Variance."""

    def line(label: str, r: dict) -> str:
        return f"| {label} | {r['batch']} | {r['num_data']} | {r['num_inducing']} | {r['rmse']:.3f} | {r['nlpd']:.3f} |"

    head = ["| run | batch | points seen | M | RMSE | NLPD |", "| --- | --- | --- | --- | --- | --- |"]
    lines = [
        "Held-out RMSE and NLPD in standardised target units and the model size M after each batch: paths 1, 2, 4, 5 "
        "one batch each (VIPS), and trajectory 3 (every fifth batch and the last).",
        "",
        *head,
    ]
    lines += [line(f"paths 1, 2, 4, 5, VIPS: path {p}", r) for p, r in zip((1, 2, 4, 5), results.get("paths", []))]
    for tag, label in (("trajectory3-vips", "VIPS"), ("trajectory3-cv", "Cond. Variance")):
        rows = results.get(tag, [])
        lines += [line(f"trajectory 3, {label}", r) for r in rows if r["batch"] % 5 == 0 or r is rows[-1]]
    return "\n".join(lines) + "\n"


def magnetic_summarise(root: Path, sweep: SweepResult, options: MagneticOptions, quiet: bool, log: Echo) -> dict:
    """Pescador-Barrios et al. 2024, §5.4, of the finished streams: M per batch (``sizes.csv``), ``table.md`` and
    ``results.json``. The field maps (``<run>-maps.png``) come from runs made here only: a run restored from the
    results tree has its metrics, not its model."""
    from ..plots import plot_lines

    for failed in sweep.failed:
        log(f"run {failed.run_id} failed: {failed.error}")
    summary: dict[str, Any] = {}
    for spec in sweep.specs:
        path = root / spec.run_id / "metrics.json"
        if not path.is_file():
            continue
        rows = [r for r in json.loads(path.read_text()) if "rmse" in r]
        summary["paths" if spec.run_id == "paths-vips" else spec.run_id] = [
            {k: r[k] for k in MAGNETIC_COLUMNS} for r in rows
        ]
        maps = root / spec.run_id / "maps.png"
        if maps.is_file():
            (root / f"{spec.run_id}-maps.png").write_bytes(maps.read_bytes())
    sizes = {
        label: ([r["batch"] for r in summary[tag]], [r["num_inducing"] for r in summary[tag]])
        for label, tag in (("VIPS", "trajectory3-vips"), ("Cond. Variance", "trajectory3-cv"))
        if tag in summary
    }
    if sizes:
        plot_lines(
            sizes,
            root / "trajectory3-sizes.png",
            xlabel="batch",
            ylabel="inducing points M",
            title="trajectory 3 in batches: model size",
        )
    write_csv(
        root / "sizes.csv",
        [{"method": label, "batch": bi, "num_inducing": mi} for label, (b, m) in sizes.items() for bi, mi in zip(b, m)],
    )
    (root / "results.json").write_text(json.dumps(summary, indent=1))
    (root / "table.md").write_text(magnetic_table(summary))
    if not quiet:
        for label, (_, m) in sizes.items():
            log(f"trajectory 3, {label}: M per batch {m}")
        if "paths" in summary:
            log(f"paths 1, 2, 4, 5 with VIPS: M after each path {[r['num_inducing'] for r in summary['paths']]}")
        log(f"wrote {root}")
        _log_kept(sweep, log)
    return summary


# ------------------------------------------------------------------------------------------- synthetic (Figs. 1, 2a)
#: Fig. 1 streams (appendix F.1): 1 an expanding domain, 2 one distribution throughout, 3 Cauchy outliers late
FIG1_DATASETS = ("synthetic1", "synthetic2", "synthetic3")
FIG1_TITLES = {
    "synthetic1": "dataset 1 (expanding domain)",
    "synthetic2": "dataset 2 (same distribution)",
    "synthetic3": "dataset 3 (late outliers)",
}
#: Fig. 2a: greedy-variance OSGPR with these fixed sizes against VIPS and the exact GP
FIG2A_SIZES = (10, 20, 30)
FIG2A_DATASET = "fig2a"
#: appendix F.1 / F.2.1: the domain of f, the SE kernel's initial length-scale, initial variance per figure, and
#: the initial noise variance (all in data units)
SYNTHETIC_DOMAIN = (0.0, 10.0)
SYNTHETIC_LENGTHSCALE = 0.5
SYNTHETIC_VARIANCE = {"fig1": 1.0, "fig2a": 1.5}
SYNTHETIC_NOISE = 0.5
SYNTHETIC_COLUMNS = ("dataset", "method", "seed", "batch", "num_data", "num_inducing", "rmse", "nlpd", "update_time")


def fig2a_dataset(seed: int = 0, size: int = 1000, batches: int = 4, noise_std: float = 0.3) -> Dataset:
    """Pescador-Barrios et al. 2024, §5.2 / appendix F.2.1: ``size`` noisy observations of f(x) = sin(2x) + cos(5x)
    in ``batches`` equal batches. The paper gives neither the input range, the order nor the noise: here x is uniform
    on [0, 10] (as its appendix F.1 sets) and sorted (a growing domain, under which a fixed M falls behind as the
    text describes), with the noise of :func:`~onlinegp.data.synthetic` (σ = 0.3)."""
    if size < batches or batches < 1:
        raise ValueError(f"need 1 <= batches <= size, got size={size}, batches={batches}")
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(*SYNTHETIC_DOMAIN, size))
    y = synthetic_function(x) + noise_std * rng.standard_normal(size)
    groups = np.concatenate([np.full(len(b), k) for k, b in enumerate(np.array_split(np.arange(size), batches))])
    return Dataset(
        x[:, None],
        y,
        FIG2A_DATASET,
        groups=groups,
        default_order="given",
        default_batches="groups",
        meta={"source": "synthetic", "seed": seed, "noise_std": noise_std},
    )


def synthetic_test_grid(seed: int, size: int = 500, noise_std: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    """Appendix F.2.1's test grid: ``size`` evenly spaced inputs on [0, 10] with noisy targets (noise drawn apart
    from the training data's)."""
    x = np.linspace(*SYNTHETIC_DOMAIN, size)
    return x[:, None], synthetic_function(x) + noise_std * np.random.default_rng([seed, 1]).standard_normal(size)


def synthetic_kernel(variance: float, dtype: torch.dtype = torch.float64) -> gpytorch.kernels.Kernel:
    """Appendix F.1/F.2.1's prior: SE with length-scale 0.5 and the given variance, no hyper-prior; the length-scale is
    in the models' scaled inputs ([0, 10] maps to [-1, 1])."""
    kernel = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())
    kernel.base_kernel.lengthscale = SYNTHETIC_LENGTHSCALE * 2 / (SYNTHETIC_DOMAIN[1] - SYNTHETIC_DOMAIN[0])
    kernel.outputscale = variance
    return kernel.to(dtype)


def _synthetic_model(method: str, variance: float, seed: int, num_steps: int | None) -> OnlineGP:
    """VIPS (δ = 0.05), OSGPR with greedy-variance Z of fixed size ('fixed-M'), or the exact GP, in data units."""
    common = {
        "kernel": synthetic_kernel(variance),
        "noise": SYNTHETIC_NOISE,
        "x_bounds": [[SYNTHETIC_DOMAIN[0]], [SYNTHETIC_DOMAIN[1]]],
        "y_stats": (0.0, 1.0),
        "seed": seed,
    }
    if method == "exact":
        return make_model("exact", num_steps=0, max_data=10**6, **common)
    steps = {**PAPER_ONLINE_OPTIONS, **({} if num_steps is None else {"num_steps": num_steps})}
    if method == "vips":
        return make_model("vips", delta=0.05, **common, **steps)
    if method.startswith("fixed-") and method[6:].isdigit() and int(method[6:]) > 0:
        return make_model("osgpr", inducing="pivoted", num_inducing=int(method[6:]), **common, **steps)
    raise ValueError(f"unknown synthetic method {method!r}: vips, exact or fixed-M (M a positive integer)")


def synthetic_stream(
    data: Dataset, method: str, seed: int, variance: float, num_steps: int | None = None
) -> list[dict]:
    """One stream of ``data`` in its own batches: after each batch, M, the RMSE of the predictive mean against f and the
    NLPD of the noisy targets (the data's noise) on the grid points of :func:`synthetic_test_grid` inside the range of
    the inputs seen so far. The exact GP is refitted from the initial θ on all data seen by L-BFGS
    (:func:`~onlinegp.experiments.protocols.lbfgs_exact_gp`); its M is left empty."""
    grid_x, grid_y = synthetic_test_grid(seed, noise_std=data.meta["noise_std"])
    model = _synthetic_model(method, variance, seed, num_steps)
    batches = batch_indices(data)
    rows = []
    for batch, idx in enumerate(batches, start=1):
        seen = np.concatenate(batches[:batch])
        start = time.perf_counter()
        if method == "exact":
            model = _synthetic_model(method, variance, seed, num_steps)
            lbfgs_exact_gp(model, data.X[seen], data.y[seen], max_iter=num_steps or 200)
        else:
            model.update(data.X[idx], data.y[idx])
        elapsed = time.perf_counter() - start
        inside = (grid_x[:, 0] >= data.X[seen, 0].min()) & (grid_x[:, 0] <= data.X[seen, 0].max())
        pred = model.predict(grid_x[inside])
        rows.append(
            {
                "dataset": data.name,
                "method": method,
                "seed": seed,
                "batch": batch,
                "num_data": len(seen),
                "num_inducing": None if method == "exact" else model.num_inducing,
                "rmse": rmse(synthetic_function(grid_x[inside, 0]), pred.mean),
                "nlpd": nlpd(grid_y[inside], pred.mean, pred.var_y),
                "update_time": elapsed,
            }
        )
    return rows


def _curves(rows: Sequence[dict], dataset: str, method: str, key: str) -> dict | None:
    """Mean and std over seeds of ``key`` per batch (x: points seen), or None without runs."""
    runs: dict[int, list[dict]] = {}
    for r in rows:
        if r["dataset"] == dataset and r["method"] == method:
            runs.setdefault(r["seed"], []).append(r)
    if not runs:
        return None
    values = np.array([[r[key] for r in sorted(rs, key=lambda r: r["batch"])] for rs in runs.values()], dtype=float)
    first = sorted(next(iter(runs.values())), key=lambda r: r["batch"])
    return {"samples": [r["num_data"] for r in first], "mean": values.mean(0), "std": values.std(0)}


def _synthetic_label(method: str) -> str:
    return {"vips": "VIPS", "exact": "Exact GP"}.get(method, f"M = {method[6:]}")


def write_synthetic(root: Path, rows: Sequence[dict], fig2a_methods: Sequence[str]) -> str:
    """``synthetic.csv`` (a row per dataset, method, seed and batch), ``fig1.png``, ``fig2a.png`` and ``table.md``
    (mean ± std over seeds per batch); returns the Markdown."""
    from ..plots import plot_sweep_curves

    write_csv(root / "synthetic.csv", rows, SYNTHETIC_COLUMNS)
    seeds = len({r["seed"] for r in rows})
    datasets = [d for d in FIG1_DATASETS if any(r["dataset"] == d for r in rows)]

    def cell(c: dict, b: int, digits: int) -> str:
        return f"{c['mean'][b]:.{digits}f} ± {c['std'][b]:.{digits}f}"

    lines = []
    if datasets:
        curves = {d: _curves(rows, d, "vips", "num_inducing") for d in datasets}
        plot_sweep_curves(
            {("num_inducing", FIG1_TITLES[d]): {"VIPS": c} for d, c in curves.items()},
            root / "fig1.png",
            title=f"Pescador-Barrios et al. 2024, Fig. 1: M chosen by VIPS per batch (mean ± std, {seeds} seeds)",
        )
        width = max(len(c["mean"]) for c in curves.values())
        lines += [
            f"**Fig. 1**: inducing points M chosen by VIPS after each batch (mean ± std over {seeds} seeds).",
            "",
            "| dataset | " + " | ".join(f"batch {b + 1}" for b in range(width)) + " |",
            "|---|" + "---|" * width,
        ]
        lines += [
            f"| {FIG1_TITLES[d]} | " + " | ".join(cell(c, b, 1) for b in range(len(c["mean"]))) + " |"
            for d, c in curves.items()
        ]
    fig2a = {m: c for m in fig2a_methods if (c := _curves(rows, FIG2A_DATASET, m, "rmse")) is not None}
    if fig2a:
        panels: dict[tuple[str, str], dict[str, dict]] = {}
        for key in ("rmse", "nlpd", "num_inducing"):
            for m in fig2a if key != "num_inducing" else [m for m in fig2a if m != "exact"]:
                panels.setdefault((key, "the Fig. 2a set"), {})[_synthetic_label(m)] = _curves(
                    rows, FIG2A_DATASET, m, key
                )
        plot_sweep_curves(
            panels,
            root / "fig2a.png",
            title=f"Pescador-Barrios et al. 2024, Fig. 2a\n(mean ± std, {seeds} seeds)",
        )
        width = len(next(iter(fig2a.values()))["mean"])
        lines += [
            "",
            f"**Fig. 2a**: after each batch, RMSE of the mean against f, NLPD of noisy targets (test grid points inside "
            f"the range seen so far) and M; mean ± std over {seeds} seeds.",
            "",
            "| method | metric | " + " | ".join(f"batch {b + 1}" for b in range(width)) + " |",
            "|---|---|" + "---|" * width,
        ]
        for m in fig2a:
            for key, digits in (("rmse", 3), ("nlpd", 2), ("num_inducing", 1)):
                if key == "num_inducing" and m == "exact":
                    continue
                c = _curves(rows, FIG2A_DATASET, m, key)
                cells = " | ".join(cell(c, b, digits) for b in range(width))
                lines.append(f"| {_synthetic_label(m)} | {'M' if key == 'num_inducing' else key.upper()} | {cells} |")
    table = "\n".join(lines) + "\n"
    (root / "table.md").write_text(table)
    return table


#: a synthetic run's files that the table and figures read (kept in the results tree, ``results/vips-synthetic/``)
SYNTHETIC_SUMMARY = ("metrics.json",)


def synthetic_job(config: dict, run_dir: Path) -> dict:
    """One (dataset, method, seed) stream of ``vips-synthetic``; the runner's job function. Writes its rows (one per
    batch) to ``metrics.json`` and returns the last batch's M, RMSE and NLPD."""
    name, method, seed, num_steps = config["dataset"], config["method"], config["seed"], config["num_steps"]
    if name == FIG2A_DATASET:
        data, variance = fig2a_dataset(seed, config["size"], config["batches"]), SYNTHETIC_VARIANCE["fig2a"]
    else:
        data, variance = load_dataset(name, seed=seed), SYNTHETIC_VARIANCE["fig1"]
    rows = synthetic_stream(data, method, seed, variance, num_steps)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "metrics.json").write_text(json.dumps(rows, indent=1))
    return {k: rows[-1][k] for k in ("num_data", "num_inducing", "rmse", "nlpd")}


@dataclass(frozen=True)
class SyntheticOptions:
    """``onlinegp bench vips-synthetic``: the ``seeds`` (data, test noise and model) and Fig. 1 ``datasets``; with
    ``fig2a``, the ``fixed`` sizes M against VIPS and (``exact``) the exact GP on a ``fig2a_size``-point set in
    ``fig2a_batches`` batches; ``num_steps`` caps L-BFGS iterations per batch (default 200)."""

    seeds: str | Sequence[int] = option(
        "0-4", "seeds (data, test noise and model), e.g. 0-3, 0,3 or 0-2,7", parse=parse_seeds
    )
    datasets: Sequence[str] = option(FIG1_DATASETS, "comma-separated Fig. 1 sets (appendix F.1)", parse=comma_items)
    fixed: Sequence[int] = option(FIG2A_SIZES, "comma-separated fixed sizes M for Fig. 2a", parse=comma_ints)
    fig2a: bool = option(True, "also run Fig. 2a (fixed M vs VIPS vs exact GP)", "--fig2a/--no-fig2a")
    fig2a_size: int = option(1000, "points of the Fig. 2a set (appendix F.2.1: 1000)")
    fig2a_batches: int = option(4, "equal batches of the Fig. 2a set (§5.2: 4)")
    num_steps: int | None = option(None, "cap L-BFGS iterations per batch (default 200)", cli_type=int)
    exact: bool = option(True, "the exact GP reference in Fig. 2a", "--exact/--no-exact")

    @property
    def fig2a_methods(self) -> list[str]:
        """Fig. 2a's methods: ``fixed-M`` per fixed size, VIPS and (``exact``) the exact GP."""
        return [f"fixed-{m}" for m in self.fixed] + ["vips"] + (["exact"] if self.exact else [])


def synthetic_specs(options: SyntheticOptions) -> list[RunSpec]:
    """A run per Fig. 1 dataset and seed (VIPS), and with ``fig2a`` a run per Fig. 2a method and seed."""
    o, seeds = options, parse_seeds(options.seeds)
    if not seeds:
        raise ValueError("give at least one seed")
    unknown = sorted(set(o.datasets) - set(FIG1_DATASETS))
    if unknown:
        raise ValueError(f"unknown Fig. 1 datasets {unknown}: choose from {', '.join(FIG1_DATASETS)}")
    specs = [
        RunSpec(f"{d}/vips/seed{s}", {"dataset": d, "method": "vips", "seed": s, "num_steps": o.num_steps})
        for s in seeds
        for d in o.datasets
    ]
    if o.fig2a:
        specs += [
            RunSpec(
                f"{FIG2A_DATASET}/{m}/seed{s}",
                {
                    "dataset": FIG2A_DATASET,
                    "method": m,
                    "seed": s,
                    "num_steps": o.num_steps,
                    "size": o.fig2a_size,
                    "batches": o.fig2a_batches,
                },
            )
            for s in seeds
            for m in o.fig2a_methods
        ]
    return specs


def synthetic_summarise(root: Path, sweep: SweepResult, options: SyntheticOptions, quiet: bool, log: Echo) -> str:
    """Pescador-Barrios et al. 2024, Figs. 1 and 2a on their synthetic sets (appendices F.1, F.2.1), of the finished
    runs: ``synthetic.csv``, ``fig1.png``, ``fig2a.png`` and ``table.md``; returns the Markdown.

    Fig. 1: VIPS (δ = 0.05; SE kernel, length-scale 0.5, variance 1, noise variance 0.5 initially) on
    :func:`~onlinegp.data.synthetic` datasets 1-3, ten batches each. Fig. 2a: OSGPR with fixed greedy-variance
    sizes (pivoted Cholesky of [Z; X]), VIPS and the exact GP on :func:`fig2a_dataset` (variance 1.5). θ by L-BFGS on
    the online bound. Metrics: RMSE and NLPD on :func:`synthetic_test_grid` within the range seen so far
    (:func:`synthetic_stream`). Choices the paper leaves open are ours: noise σ = 0.3, the Fig. 2a input range and
    order, RMSE against the noise-free f (NLPD of noisy targets), and testing only inside the range seen so far. Each
    (dataset, method, seed) stream is a run (:func:`synthetic_job`) whose rows are kept in the results tree
    (``results/vips-synthetic/``)."""
    for failed in sweep.failed:
        log(f"run {failed.run_id} failed: {failed.error}")
    rows: list[dict] = []
    for spec in sweep.specs:
        path = root / spec.run_id / "metrics.json"
        if path.is_file():
            rows += json.loads(path.read_text())
    table = write_synthetic(root, rows, options.fig2a_methods)
    if not quiet:
        log(table)
        log(f"wrote {root / 'synthetic.csv'}, {root / 'table.md'}, {root / 'fig1.png'}, {root / 'fig2a.png'}")
        _log_kept(sweep, log)
    return table


#: the ``onlinegp bench`` commands of this module (:mod:`onlinegp.experiments.bench.protocol`)
BENCHES = {
    "vips-table1": Bench(
        "vips-table1",
        Table1Options,
        table1_specs,
        table1_job,
        table1_summarise,
        TABLE1_SUMMARY,
        threads=1,
        description="Pescador-Barrios et al. 2024, Table 1 (+ NLPD, Figs. 3/6): exact GP, Conditional Variance, OIPS, "
        "VIPS on sorted UCI streams.",
    ),
    "vips-magnetic": Bench(
        "vips-magnetic",
        MagneticOptions,
        magnetic_specs,
        magnetic_job,
        magnetic_summarise,
        MAGNETIC_SUMMARY,
        threads=1,
        description="Pescador-Barrios et al. 2024, §5.4: magnetic-field maps path by path (VIPS), and trajectory 3 in "
        "batches (VIPS vs CV).",
    ),
    "vips-synthetic": Bench(
        "vips-synthetic",
        SyntheticOptions,
        synthetic_specs,
        synthetic_job,
        synthetic_summarise,
        SYNTHETIC_SUMMARY,
        threads=1,
        description="Pescador-Barrios et al. 2024, Figs. 1 and 2a: M chosen by VIPS on synthetic sets 1-3, and fixed "
        "M = 10/20/30 vs VIPS vs the exact GP on a 1000-point set.",
    ),
}
