"""Where WGPR's training time goes on a reduced kin40k stream, and what each speed lever does to its time and RMSE.

Kepler et al. 2021 (Table II) put WGPR's kin40k training time at 6.5x LGPR's, SOLAR-GP's at 3.8x and OVFE's at 3.7x;
the kept sweep (``onlinegp bench wgpr``, docs/results/wgpr.md) has them far above. This script runs the bench's own
kin40k job (:func:`onlinegp.experiments.protocols.wgpr_run`: its split, streaming order, scaling, batch size and model
configs, the sparse models' pseudo-inputs moved as the bench's default) cut to ``--points`` training rows (the bench's
``--max-points``: a random subsample in the stream's order), one trial, one torch thread, for each variant of
:data:`VARIANTS`: a method of the bench with options
added (WGPR's and the ensembles' own, and options of every OSGPR, e.g. its ``training.tolerance``). Per variant it
records the training time (wall, as the bench; and the process's CPU time of the same calls), its ratio to the LGPR
run of the same invocation, the test RMSE, the number of members, the update phases the model reports (WGPR:
'fresh', 'candidates', 'wasserstein'), and the L-BFGS fits of every OSGPR (bound evaluations per fit, i.e. calls of
the optimiser's closure, and their wall time), WGPR's smallest score min_j w_j per update (Eq. 7: it splits where
that is at least ε), with the load average before and after.

    OMP_NUM_THREADS=1 python benchmarks/studies/profile_wgpr.py [--points 2000] [--seed 0] [--variants "wgpr;wgpr tol 1e-4"]

Each invocation runs LGPR first (the ratios' reference) and then the variants asked for, in order, each method's
plain run before its first lever; a lever's entry repeats that plain run's numbers (``before``). It writes
``benchmarks/studies/results/profile_wgpr.json``, replacing the entries of the variants it ran at the same points and seed
(the others are kept, each with the numbers of its own invocation). Timings taken beside other jobs on a shared
machine are inflated; compare variants of one invocation, and the CPU times rather than the wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "perf"))  # common.py, paper_code.py
from common import STUDY_RESULTS as RESULTS  # noqa: E402
from common import machine  # noqa: E402

from onlinegp.base import OnlineGP  # noqa: E402
from onlinegp.experiments.bench.wgpr import WgprOptions, specs_for  # noqa: E402
from onlinegp.experiments.protocols import wgpr_run  # noqa: E402
from onlinegp.models.osgpr import OSGPR  # noqa: E402
from onlinegp.models.registry import model_class  # noqa: E402

NAME = "profile_wgpr"
DATASET = "kin40k"
#: a variant: the bench's method, options added to its params, and options added to every OSGPR it builds
VARIANTS: dict[str, tuple[str, dict, dict]] = {
    "lgpr": ("lgpr", {}, {}),
    "wgpr": ("wgpr", {}, {}),
    "wgpr tol 1e-4": ("wgpr", {}, {"training": {"tolerance": 1e-4}}),
    "wgpr tol 1e-3": ("wgpr", {}, {"training": {"tolerance": 1e-3}}),
    "wgpr tol 1e-5": ("wgpr", {}, {"training": {"tolerance": 1e-5}}),
    "wgpr tol 1e-4 fresh nearest": ("wgpr", {"fresh_start": "nearest"}, {"training": {"tolerance": 1e-4}}),
    "wgpr fresh nearest": ("wgpr", {"fresh_start": "nearest"}, {}),
    "wgpr early accept": ("wgpr", {"early_accept": True}, {}),
    "wgpr tol 1e-4 early accept": ("wgpr", {"early_accept": True}, {"training": {"tolerance": 1e-4}}),
    "wgpr tol 1e-5 early accept": ("wgpr", {"early_accept": True}, {"training": {"tolerance": 1e-5}}),
    "solar-gp": ("solar-gp", {}, {}),
    "solar-gp tol 1e-4": ("solar-gp", {}, {"training": {"tolerance": 1e-4}}),
    "solar-gp tol 1e-5": ("solar-gp", {}, {"training": {"tolerance": 1e-5}}),
    "solar-gp tol 1e-4 fresh nearest": ("solar-gp", {"fresh_start": "nearest"}, {"training": {"tolerance": 1e-4}}),
    "ovfe": ("ovfe", {}, {}),
    "ovfe tol 1e-4": ("ovfe", {}, {"training": {"tolerance": 1e-4}}),
    "ovfe tol 1e-5": ("ovfe", {}, {"training": {"tolerance": 1e-5}}),
}


#: what a lever's entry repeats of its method's plain run in the same invocation
BEFORE = ("train_time", "cpu_time", "ratio_wall", "ratio_cpu", "rmse", "num_models", "evaluations_per_fit")


def config_of(variant: str, points: int, seed: int) -> dict:
    """The bench's kin40k run of ``variant``'s method (its settings and defaults) cut to ``points``, with the
    variant's options added."""
    method, params, member_options = VARIANTS[variant]
    base = WgprOptions(max_points=points).base()
    (spec,) = specs_for([DATASET], [method], [], [seed], base)
    config = {**spec.config, "params": {**spec.config["params"], **params}}
    return {**config, "member_options": member_options} if member_options else config


def run(variant: str, points: int, seed: int) -> dict:
    """One variant's run with its update calls timed (wall and CPU) and phases summed, and every L-BFGS fit of an
    OSGPR counted."""
    config = config_of(variant, points, seed)
    method = config["method"]
    cls = model_class("osgpr" if method == "ovfe" else method)
    phases: dict[str, float] = {}
    cpu = [0.0]
    fits: list[tuple[int, float]] = []
    best_scores: list[float | None] = []  # WGPR: min_j w_j of each update (None: the first)
    lbfgs, update = OSGPR._lbfgs, OnlineGP.update

    def timed_update(self, *args, **kwargs):
        c0 = time.process_time()
        report = update(self, *args, **kwargs)
        cpu[0] += time.process_time() - c0
        for name, seconds in report.timings.items():
            phases[name] = phases.get(name, 0.0) + seconds
        if "scores" in report.extra:
            best_scores.append(min(report.extra["scores"], default=None))
        return report

    def counted_lbfgs(self, *args, **kwargs):
        t0 = time.perf_counter()
        evaluations = lbfgs(self, *args, **kwargs)
        fits.append((evaluations, time.perf_counter() - t0))
        return evaluations

    load_before = os.getloadavg()
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        stack.enter_context(mock.patch.object(cls, "update", timed_update))
        stack.enter_context(mock.patch.object(OSGPR, "_lbfgs", counted_lbfgs))
        if method == "lgpr":  # its offline fit is part of its training time
            fit = cls.fit_hyperparameters
            stack.enter_context(mock.patch.object(cls, "fit_hyperparameters", cpu_timed(fit, cpu)))
        out = wgpr_run(config, Path(tmp))
    evaluations = [e for e, _ in fits]
    return {
        "variant": variant,
        "points": points,
        "seed": seed,
        "config": config,
        "train_time": out["train_time"],
        "cpu_time": cpu[0],
        "rmse": out["rmse"],
        "num_models": out["num_models"],
        "failed_updates": out["failed_updates"],
        "phases": phases,
        "best_scores": best_scores,
        "fits": len(fits),
        "fit_time": sum(t for _, t in fits),
        "evaluations_per_fit": {
            "mean": statistics.fmean(evaluations) if fits else 0.0,
            "median": statistics.median(evaluations) if fits else 0.0,
            "max": max(evaluations, default=0),
            "total": sum(evaluations),
        },
        "load_average": {"before": list(load_before), "after": list(os.getloadavg())},
    }


def cpu_timed(fn, total: list[float]):
    """``fn`` with its process CPU time added to ``total[0]``."""

    def wrapped(*args, **kwargs):
        c0 = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            total[0] += time.process_time() - c0

    return wrapped


def line(row: dict) -> str:
    e = row["evaluations_per_fit"]
    phases = ", ".join(f"{k} {v:.1f}" for k, v in sorted(row["phases"].items(), key=lambda kv: -kv[1])[:4])
    return (
        f"{row['variant']}: {row['train_time']:.1f} s wall ({row['ratio_wall']:.1f}x LGPR), {row['cpu_time']:.1f} s CPU "
        f"({row['ratio_cpu']:.1f}x), RMSE {row['rmse']:.4f}, {row['num_models']} models, {row['fits']} fits "
        f"({e['mean']:.0f} evaluations each, {row['fit_time']:.1f} s); phases: {phases}"
        + (f"; before: {row['before']['ratio_cpu']:.1f}x, RMSE {row['before']['rmse']:.4f}" if "before" in row else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=2000, help="training rows streamed (batches of the bench's size)")
    parser.add_argument("--seed", type=int, default=0, help="the trial (split, subsample and model seed)")
    parser.add_argument("--variants", default="wgpr;wgpr tol 1e-4", help="names of VARIANTS separated by semicolons")
    args = parser.parse_args()
    torch.set_num_threads(1)
    names = [v for v in args.variants.split(";") if v != "lgpr"]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant {unknown[0]!r}; choose from {'; '.join(VARIANTS)}")
    path = RESULTS / f"{NAME}.json"
    kept = json.loads(path.read_text())["runs"] if path.exists() else []
    invocation = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": machine()}
    order = ["lgpr"]  # the reference first, and each method's plain run before its levers
    for variant in names:
        order += [v for v in (VARIANTS[variant][0], variant) if v not in order]
    rows: dict[str, dict] = {}
    for variant in order:
        row = run(variant, args.points, args.seed)
        reference, plain = rows.get("lgpr", row), rows.get(VARIANTS[variant][0])
        row.update(
            ratio_wall=row["train_time"] / reference["train_time"],
            ratio_cpu=row["cpu_time"] / reference["cpu_time"],
            invocation=invocation,
        )
        if plain is not None:  # the same method without the lever, in this invocation
            row["before"] = {k: plain[k] for k in BEFORE}
        rows[variant] = row
        print(line(row), flush=True)
        done = {(r["variant"], r["points"], r["seed"]) for r in rows.values()}
        keep = [r for r in kept if (r["variant"], r["points"], r["seed"]) not in done]
        RESULTS.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"benchmark": NAME, "runs": keep + list(rows.values())}, indent=1, default=float))


if __name__ == "__main__":
    main()
