"""Streaming defaults against the exact GP on every bundled UCI set: the regression check of every default.

The protocol of a user with a tabular stream: a seeded shuffle of the dataset, ``test_size`` held-out points and
up to ``train_size`` training points, both standardised with the training points' mean and standard deviation
(inputs per column, the target), the training points streamed in batches of ``batch_size`` through a model
built by name with nothing but its defaults (``make_model(name, seed=split)``: no bounds, no target statistics,
no kernel settings). After every batch the model predicts the test points; RMSE and NLPD are in standardised
target units. The reference is the exact GP (ARD RBF, θ and σ² by at most ``exact_iterations`` L-BFGS iterations on all training points; 100
change elevators' RMSE by under 1% against 50), fitted from each start in :data:`EXACT_STARTS` (the kernel's
default, and the θ of the batch sparse GP below) and kept where log p(y) + log p(θ) is highest: from the default
start alone, bike's fit stopped at length-scales near their start (RMSE 0.194), far below the optimum the sparse
GP's θ leads to (0.036). The table
gives each method's final RMSE as a ratio to the exact GP's, its final NLPD minus the exact GP's, the worst NLPD
of any batch, and the update time, over splits; the targets are within 1.25x / 0.3 for the sparse streaming
regressors and 1.5x / 0.5 for POAM, OVC++ and WISKI, and no NLPD above 10 anywhere.

A second reference, ``sgpr`` (asked for by name), is the batch sparse GP the streaming ones approximate: OSGPR's
defaults (M = 500 by pivoted Cholesky, L-BFGS on the collapsed bound, Titsias 2009) given all training points as
one batch, with the scaling fitted on them. Its ratio is the best a model of that size can do with θ fitted at
once, which separates what the budget M costs from what streaming costs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...data import UCI
from ...io import atomic_write, write_csv
from ..flags import option
from ..protocols import defaults_stream
from .parse import comma_items
from .protocol import Bench, Echo
from .runner import RunSpec, SweepResult

#: every streaming regression method the table checks
METHODS = (
    "osgpr",
    "ssgp",
    "ssgp++",
    "osvgp",
    "vips",
    "conditional-variance",
    "oips",
    "poam",
    "ovc++",
    "wiski",
    "wgpr",
)
#: (RMSE ratio, NLPD difference) each method must stay within
TARGETS = {m: (1.5, 0.5) if m in ("poam", "ovc++", "wiski") else (1.25, 0.3) for m in METHODS}
#: the references: the exact GP, and the batch sparse GP of the streaming methods' size (no target)
REFERENCES = ("exact", "sgpr")
NLPD_CEILING = 10.0
#: the starts of the exact GP's fit (the best objective is kept): the kernel's default, the batch sparse GP's θ
EXACT_STARTS = ("default", "sgpr")
#: each method's defaults revision, part of its runs' config, so of their key: raised for a method whenever one of its
#: defaults changes, so that the results tree never serves a run of older defaults as done. 2: the log-normal
#: length-scale prior above 3 inputs (every method); 3: five times the Adam steps per batch above 3 inputs. A change of
#: defaults that comes with a new version needs none (the version is part of the key too)
DEFAULTS_REVISIONS = {**dict.fromkeys(REFERENCES + METHODS, 2), "ssgp++": 3, "poam": 3, "ovc++": 3}


#: the files of a run kept in the results tree (onlinegp.experiments.bench.runner)
SUMMARY = ("metrics.csv", "model.json")  # model.json: the options the model ran with (base.model_record)


def defaults_job(config: dict, run_dir: Path) -> dict:
    """One (dataset, method, split) stream (:func:`~onlinegp.experiments.protocols.defaults_stream`); writes
    ``metrics.csv`` (one row per batch) and returns the final row."""
    return defaults_stream(config, run_dir)


@dataclass(frozen=True)
class DefaultsOptions:
    """``onlinegp bench defaults``: the ``datasets`` and ``methods`` (with the references of :data:`REFERENCES` asked
    for by name; the exact GP always runs), ``splits`` seeded shuffles, up to ``train_size`` training points in
    batches of ``batch_size``, up to ``test_size`` test points, and the exact GP's L-BFGS iterations."""

    datasets: Sequence[str] = option(UCI, "comma-separated bundled UCI sets", parse=comma_items)
    methods: Sequence[str] = option(
        METHODS,
        "comma-separated registered streaming models, and sgpr: the batch sparse GP of the same size (a reference)",
        parse=comma_items,
    )
    splits: int = option(3, "seeded shuffles (seeds 0..splits-1)")
    train_size: int = option(2000, "training points streamed (fewer on small sets)")
    test_size: int = option(1000, "held-out points (at most 40% of a set)")
    batch_size: int = option(100, "points per update")
    exact_iterations: int = option(100, "L-BFGS iterations of the exact GP")


def specs(options: DefaultsOptions) -> list[RunSpec]:
    """A run per (dataset, method, split), the exact GP first."""
    o = options
    unknown = [m for m in o.methods if m not in METHODS and m not in REFERENCES]
    if unknown:
        raise ValueError(f"unknown method(s) {', '.join(unknown)}: choose from {', '.join(REFERENCES + METHODS)}")
    out = []
    for name in o.datasets:
        for method in ("exact", *[m for m in o.methods if m != "exact"]):
            for split in range(o.splits):
                config = dict(
                    dataset=name,
                    method=method,
                    split=split,
                    train_size=o.train_size,
                    test_size=o.test_size,
                    batch_size=o.batch_size,
                    defaults_revision=DEFAULTS_REVISIONS[method],
                )
                if method == "exact":
                    config |= {"exact_iterations": o.exact_iterations, "exact_starts": list(EXACT_STARTS)}
                out.append(RunSpec(f"{name}/{method}/split{split}", config))
    return out


def summarise(results: dict[tuple[str, str, int], dict]) -> list[dict]:
    """One row per (dataset, method): mean over splits of the ratio/difference to the same split's exact GP."""
    table = []
    order = (*METHODS, "sgpr")
    keys = sorted({(d, m) for d, m, _ in results if m != "exact"}, key=lambda k: (k[0], order.index(k[1])))
    for dataset, method in keys:
        splits = [s for d, m, s in results if (d, m) == (dataset, method) and (d, "exact", s) in results]
        if not splits:
            continue
        runs = [results[dataset, method, s] for s in splits]
        exact = [results[dataset, "exact", s] for s in splits]
        ratio = [r["rmse"] / e["rmse"] for r, e in zip(runs, exact)]
        diff = [r["nlpd"] - e["nlpd"] for r, e in zip(runs, exact)]
        max_ratio, max_diff = TARGETS.get(method, (math.inf, math.inf))
        table.append(
            {
                "dataset": dataset,
                "method": method,
                "splits": len(splits),
                "rmse": float(np.mean([r["rmse"] for r in runs])),
                "nlpd": float(np.mean([r["nlpd"] for r in runs])),
                "exact_rmse": float(np.mean([e["rmse"] for e in exact])),
                "exact_nlpd": float(np.mean([e["nlpd"] for e in exact])),
                "rmse_ratio": float(np.mean(ratio)),
                "nlpd_diff": float(np.mean(diff)),
                "worst_nlpd": float(max(r["worst_nlpd"] for r in runs)),
                "num_inducing": float(np.mean([r.get("num_inducing", math.nan) for r in runs])),
                "update_time": float(np.mean([r["update_time"] for r in runs])),
                "meets_target": bool(
                    np.mean(ratio) <= max_ratio
                    and np.mean(diff) <= max_diff
                    and max(r["worst_nlpd"] for r in runs) <= NLPD_CEILING
                ),
            }
        )
    return table


def write_table(table: list[dict], out: Path, caption: str) -> None:
    """``table.csv`` (every column) and ``table.md`` (methods as rows, datasets as columns: ratio / difference)."""
    write_csv(out / "table.csv", table)
    datasets = list(dict.fromkeys(r["dataset"] for r in table))
    methods = [m for m in METHODS if any(r["method"] == m for r in table)]
    cell = {(r["dataset"], r["method"]): r for r in table}
    lines = [caption, "", "| method | " + " | ".join(datasets) + " |", "|---" * (len(datasets) + 1) + "|"]
    for m in methods:
        cells = []
        for d in datasets:
            r = cell.get((d, m))
            if r is None:
                cells.append("")
                continue
            mark = "" if r["meets_target"] else " ✗"
            cells.append(f"{r['rmse_ratio']:.2f} / {r['nlpd_diff']:+.2f}{mark}")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    exact = {d: next(r for r in table if r["dataset"] == d) for d in datasets}
    if any(r["method"] == "sgpr" for r in table):
        lines.append(
            "| *batch SGPR, same M (reference)* | "
            + " | ".join(
                f"{cell[d, 'sgpr']['rmse_ratio']:.2f} / {cell[d, 'sgpr']['nlpd_diff']:+.2f}"
                if (d, "sgpr") in cell
                else ""
                for d in datasets
            )
            + " |"
        )
    lines.append(
        "| *exact GP RMSE / NLPD* | "
        + " | ".join(f"{exact[d]['exact_rmse']:.3f} / {exact[d]['exact_nlpd']:.2f}" for d in datasets)
        + " |"
    )
    lines += ["", "Update time (s, all batches, mean over splits):", ""]
    lines += ["| method | " + " | ".join(datasets) + " |", "|---" * (len(datasets) + 1) + "|"]
    for m in methods:
        times = [f"{cell[d, m]['update_time']:.1f}" if (d, m) in cell else "" for d in datasets]
        lines.append(f"| {m} | " + " | ".join(times) + " |")
    atomic_write(out / "table.md", "\n".join(lines) + "\n")


def summarise_sweep(out: Path, sweep: SweepResult, options: DefaultsOptions, quiet: bool, log: Echo) -> list[dict]:
    """Write ``table.md``/``table.csv``/``results.json`` to ``out`` from the finished runs; returns the table."""
    for failed in sweep.failed:
        log(f"run {failed.run_id} failed: {failed.error}")
    finished = {}
    for r in sweep.runs:
        if r.status in ("done", "skipped"):
            dataset, method, split = r.run_id.split("/")
            finished[dataset, method, int(split.removeprefix("split"))] = r.value
    table = summarise(finished)
    atomic_write(out / "results.json", json.dumps(table, indent=1))
    if table:
        caption = (
            f"Final test RMSE ratio / NLPD difference to the exact GP (✗: outside the target or an NLPD above "
            f"{NLPD_CEILING:g} at some batch); up to {options.train_size} training points in batches of "
            f"{options.batch_size}, up to {options.test_size} test points, {options.splits} split(s), every model "
            "with its defaults."
        )
        write_table(table, out, caption)
        if not quiet:
            log((out / "table.md").read_text())
            log(f"wrote {out / 'table.md'}, {out / 'table.csv'}, {out / 'results.json'}")
    return table


#: the ``onlinegp bench`` command of this module (:mod:`onlinegp.experiments.bench.protocol`)
BENCHES = {
    "defaults": Bench(
        "defaults",
        DefaultsOptions,
        specs,
        defaults_job,
        summarise_sweep,
        summary=SUMMARY,
        threads=1,
        description="Every streaming regression method with its defaults against the exact GP on the bundled UCI sets "
        "(RMSE ratio, NLPD difference, worst NLPD, update time): the regression check of the defaults.",
    )
}
