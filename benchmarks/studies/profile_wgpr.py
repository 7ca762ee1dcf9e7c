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

``--render`` writes docs/results/wgpr-profile.md from the committed JSON alone (every number on the page comes from it;
a test checks the page is what the JSON renders to):

    python benchmarks/studies/profile_wgpr.py --render
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
from common import RESULTS as PERF_RESULTS  # noqa: E402
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
    # Bui et al. 2017's members (θ at the selected pseudo-inputs, the old data at their batches' noise)
    "wgpr bui members": ("wgpr", {}, {"fit_inducing": "selected", "old_noise": "fixed"}),
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


PAGE = Path(__file__).resolve().parents[2] / "docs" / "results" / "wgpr-profile.md"
SOURCE = "benchmarks/studies/results/profile_wgpr.json"
SCRIPT = "benchmarks/studies/profile_wgpr.py"
LABELS = {"lgpr": "LGPR", "wgpr": "WGPR", "solar-gp": "SOLAR-GP", "ovfe": "OVFE"}
WGPR_PHASES = ("fresh", "candidates", "wasserstein")


def span(values, fmt: str = "{:.1f}", sep: str = "-") -> str:
    """``values`` formatted: one value if they all read the same, else their smallest and largest."""
    values = sorted(values)
    low, high = fmt.format(values[0]), fmt.format(values[-1])
    return low if low == high else f"{low}{sep}{high}"


def listed(values) -> str:
    """The distinct ``values``, sorted."""
    return ", ".join(sorted(set(values)))


def percent(new: float, old: float) -> int:
    """The change from ``old`` to ``new`` in whole percent (no -0)."""
    return int(round(100 * (new / old - 1))) or 0


def pct(new: float, old: float) -> str:
    return f"{percent(new, old):+d} %"


def entries(runs: list[dict], variant: str) -> list[dict]:
    """The kept entries of ``variant``, by trial."""
    return sorted((r for r in runs if r["variant"] == variant), key=lambda r: (r["points"], r["seed"]))


def levers(method: str) -> list[str]:
    return [v for v, (m, _, _) in VARIANTS.items() if m == method and v != method]


def lever_name(variant: str) -> str:
    method, params, member_options = VARIANTS[variant]
    tolerance = f"{member_options['training']['tolerance']:.0e}".replace("e-0", "e-") if member_options else ""
    names = [f"tolerance {tolerance}"] if tolerance else []
    names += ["early accept"] * bool(params.get("early_accept")) + ["fresh from the nearest"] * (
        "fresh_start" in params
    )
    return ", ".join(names)


def plain_runs(runs: list[dict], method: str, seed: int) -> tuple[dict | None, list[dict]]:
    """``method``'s kept plain run of trial ``seed`` and the plain runs of the other invocations (their levers'
    ``before``), one per invocation."""
    kept = next((r for r in runs if r["variant"] == method and r["seed"] == seed), None)
    seen = {kept["invocation"]["started"]} if kept else set()
    others = []
    for r in runs:
        if VARIANTS[r["variant"]][0] == method and r["seed"] == seed and "before" in r:
            if r["invocation"]["started"] not in seen:
                seen.add(r["invocation"]["started"])
                others.append(r["before"])
    return kept, others


def evaluations(row: dict) -> str:
    e = row["evaluations_per_fit"]
    return f"{e['mean']:.0f}, {e['max']}" if e["total"] or e["max"] else "–"


def load(row: dict) -> str:
    return f"{row['load_average']['before'][0]:.1f} / {row['load_average']['after'][0]:.1f}"


def method_table(runs: list[dict], method: str) -> list[str]:
    """``method``'s runs, trial by trial: the kept plain run, the other invocations' plain runs, then each lever
    beside the plain run of its own invocation."""
    lines = [
        "| trial | variant | wall s | CPU s | x LGPR, wall | x LGPR, CPU (plain beside it) | plain's CPU / this"
        " | RMSE (plain beside it) | members | fits | evaluations per fit: mean, max | load before / after |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for seed in sorted({r["seed"] for r in runs if VARIANTS[r["variant"]][0] == method}):
        kept, others = plain_runs(runs, method, seed)
        if kept:
            lines.append(
                f"| {seed} | plain | {kept['train_time']:.1f} | {kept['cpu_time']:.1f} | {kept['ratio_wall']:.1f}"
                f" | {kept['ratio_cpu']:.1f} | | {kept['rmse']:.4f} | {kept['num_models']} | {kept['fits']}"
                f" | {evaluations(kept)} | {load(kept)} |"
            )
        if others:
            lines.append(
                f"| {seed} | plain, in {len(others)} other invocation{'s' * (len(others) > 1)}"
                f" | {span(o['train_time'] for o in others)} | {span(o['cpu_time'] for o in others)}"
                f" | {span(o['ratio_wall'] for o in others)} | {span(o['ratio_cpu'] for o in others)} |"
                f" | {span((o['rmse'] for o in others), '{:.4f}')} | {span((o['num_models'] for o in others), '{}')}"
                f" | | {span((o['evaluations_per_fit']['mean'] for o in others), '{:.0f}')},"
                f" {span((o['evaluations_per_fit']['max'] for o in others), '{}')} | |"
            )
        for variant in levers(method):
            for r in (r for r in entries(runs, variant) if r["seed"] == seed):
                b = r["before"]
                lines.append(
                    f"| {seed} | {lever_name(variant)} | {r['train_time']:.1f} | {r['cpu_time']:.1f}"
                    f" | {r['ratio_wall']:.1f} | {r['ratio_cpu']:.1f} ({b['ratio_cpu']:.1f})"
                    f" | {b['cpu_time'] / r['cpu_time']:.1f}x | {r['rmse']:.4f} ({b['rmse']:.4f})"
                    f" | {r['num_models']} | {r['fits']} | {evaluations(r)} | {load(r)} |"
                )
    return lines


def wgpr_phases(runs: list[dict]) -> list[str]:
    """Each WGPR run's wall time by phase, its L-BFGS fits and its smallest score per update."""
    lines = [
        "| trial | variant | wall s | L-BFGS fits: share of wall | fits | ms per evaluation | fresh | candidates"
        " | Wasserstein | the rest | min_j w_j per update: median (range) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for variant in ["wgpr", *levers("wgpr")]:
        for r in entries(runs, variant):
            t, p = r["train_time"], r["phases"]
            scores = [s for s in r.get("best_scores", []) if s is not None]
            scored = f"{statistics.median(scores):.1f} ({span(scores)})" if scores else "not recorded (an older entry)"
            lines.append(
                f"| {r['seed']} | {lever_name(variant) or 'plain'} | {t:.1f} | {r['fit_time'] / t:.1%} | {r['fits']}"
                f" | {1000 * r['fit_time'] / r['evaluations_per_fit']['total']:.1f}"
                + "".join(f" | {p.get(k, 0.0) / t:.1%}" for k in WGPR_PHASES)
                + f" | {1 - sum(p.get(k, 0.0) for k in WGPR_PHASES) / t:.1%} | {scored} |"
            )
    return lines


def other_phases(runs: list[dict]) -> list[str]:
    lines = ["| method | trial | variant | phases (wall s, largest first) |", "| --- | --- | --- | --- |"]
    for method in ("lgpr", "solar-gp", "ovfe"):
        for variant in [method, *levers(method)]:
            for r in entries(runs, variant):
                phases = ", ".join(f"{k} {v:.1f}" for k, v in sorted(r["phases"].items(), key=lambda kv: -kv[1]))
                lines.append(f"| {LABELS[method]} | {r['seed']} | {lever_name(variant) or 'plain'} | {phases} |")
    return lines


def invocations(runs: list[dict]) -> dict[str, list[dict]]:
    """The kept entries by the invocation that ran them, in the order they ran."""
    out: dict[str, list[dict]] = {}
    for r in sorted(runs, key=lambda r: r["invocation"]["started"]):
        out.setdefault(r["invocation"]["started"], []).append(r)
    return out


def commands(runs: list[dict]) -> list[str]:
    """The command of each invocation whose entries the JSON keeps (its kept variants; it also ran LGPR and each
    method's plain run first, whose entries a later invocation may have replaced)."""
    lines = ["```"]
    for started, rows in invocations(runs).items():
        names = ";".join(r["variant"] for r in rows if r["variant"] != "lgpr") or "lgpr"
        (points,), (seed,) = {r["points"] for r in rows}, {r["seed"] for r in rows}
        lines += [
            f"# {started}, code {rows[0]['invocation']['machine']['code']}",
            f'OMP_NUM_THREADS=1 python {SCRIPT} --points {points} --seed {seed} --variants "{names}"',
        ]
    return lines + [f"python {SCRIPT} --render", "```"]


def invocation_table(runs: list[dict]) -> list[str]:
    lines = [
        "| invocation started | code | trial | entries kept | its LGPR run: wall s, CPU s | load average at its start"
        " (1, 5, 15 min) | 1-minute load before and after its runs |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for started, rows in invocations(runs).items():
        m, r = rows[0]["invocation"]["machine"], rows[0]
        loads = [x for row in rows for x in (row["load_average"]["before"][0], row["load_average"]["after"][0])]
        lines.append(
            f"| {started} | {m['code']} | {r['seed']} | {len(rows)}"
            f" | {r['train_time'] / r['ratio_wall']:.1f}, {r['cpu_time'] / r['ratio_cpu']:.1f}"
            f" | {', '.join(f'{x:.1f}' for x in m['load_average'])} | {span(loads)} |"
        )
    return lines


def by_seed(rows: list[dict], text) -> str:
    """``text(row)`` of each trial's entry, joined: 'a in trial 0 and b in trial 1'."""
    parts = [f"{text(r)} in trial {r['seed']}" for r in rows]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def intro(runs: list[dict]) -> list[str]:
    config, machines = runs[0]["config"], [r["invocation"]["machine"] for r in runs]
    points = span((r["points"] for r in runs), "{}")
    loads = [x for r in runs for x in (r["load_average"]["before"][0], r["load_average"]["after"][0])]
    lgpr = entries(runs, "lgpr")[0]
    kept, others = plain_runs(runs, "wgpr", lgpr["seed"])
    plain_cpu = [p["cpu_time"] for p in [kept, *others] if p]
    members = [r["num_models"] for r in entries(runs, "wgpr")]
    return [
        f"# Where WGPR's training time goes, and what cuts it (profile on {points} {DATASET} rows)",
        "",
        f"<!-- generated by {SCRIPT} --render from {SOURCE} -->",
        "",
        f"The WGPR bench's own {DATASET} job (`wgpr_run`: split, order, scaling, the four methods' settings,"
        f" pseudo-inputs moved) cut to {points} training rows ({config['max_points'] // config['batch_size']} batches"
        f" of {config['batch_size']}), {config['max_test']} test rows, torch threads"
        f" {span((m['torch_threads'] for m in machines), '{}')}, on the shared {span((m['cpus'] for m in machines), '{}')}-core machine beside other jobs"
        f" (1-minute load average {span(loads)} before and after the runs). The training time is that of the update"
        " calls (LGPR's offline fit included), as wall time (as the bench times it) and as the process's CPU time:"
        " **compare the CPU times**, and each lever with its method's plain run in the same invocation (`before` in"
        f" the JSON), since the plain runs of different invocations differ (WGPR's in trial {lgpr['seed']}:"
        f" {span(plain_cpu)} CPU s). At this"
        " length the ratios to LGPR are lower than the kept sweep's on [the WGPR page](wgpr.md), which also has the"
        f" paper's: LGPR's offline hyperparameter fit is most of its time (its update phases sum to"
        f" {sum(lgpr['phases'].values()):.1f} of its {lgpr['train_time']:.1f} s wall in trial {lgpr['seed']}), and"
        f" WGPR has {span(members, '{}')} members here.",
        "",
        "Made by these commands, one per invocation whose entries the JSON keeps (each also ran LGPR and each"
        " method's plain run before its levers; a later invocation's entries replace an earlier one's of the same"
        " variant and trial), and the page by the last:",
        "",
        *commands(runs),
        "",
        f"Machine: {listed(m['processor'] for m in machines)}, {listed(m['platform'] for m in machines)}, torch"
        f" {listed(m['torch'] for m in machines)}; code {listed(m['code'] for m in machines)}.",
        "",
        *invocation_table(runs),
    ]


def where_time_goes(runs: list[dict]) -> list[str]:
    p = entries(runs, "wgpr")[0]
    t, e = p["train_time"], p["evaluations_per_fit"]
    updates = p["config"]["max_points"] // p["config"]["batch_size"]
    share = {k: p["phases"].get(k, 0.0) / t for k in WGPR_PHASES}
    return [
        f"**Where WGPR's time goes** (trial {p['seed']}, the plain run: {t:.0f} s wall; the phase table below has every WGPR run):"
        f" L-BFGS fits of OSGPR members **{p['fit_time'] / t:.1%}** ({p['fits']} fits: a fresh member at each of the"
        f" {updates} updates, {p['fits'] - updates} candidates), split by WGPR's phases into candidates"
        f" {share['candidates']:.0%}, fresh members {share['fresh']:.0%}, the Wasserstein scores"
        f" {share['wasserstein']:.1%}; the copies and health checks the rest. **Every fit runs its whole budget**:"
        f" {e['mean']:.0f} bound evaluations per fit on average (median {e['median']:g}, at most {e['max']}; OSGPR's"
        " iteration cap `LBFGS_MAX_ITER`, the line search adding evaluations), because with the pseudo-inputs moved"
        " neither of L-BFGS's tolerances (on the gradient and on the change) is reached. One evaluation took about"
        f" {1000 * p['fit_time'] / e['total']:.0f} ms of wall time here (the fits' time over their evaluations, beside"
        " other jobs): at a batch's size that is per-operation overhead of the bound and of autograd's backward, not"
        " floating-point work. There is **no repeated work to cache**: the candidates are different members, and every"
        " evaluation has a new θ and Z. The candidates already start warm (a copy keeps the member's θ, and Z' is"
        " chosen among its Z and the batch).",
        "",
        *fast_bound(),
        "",
        "The levers (all off by default; a lever changes WGPR's numbers only when set):",
        "",
        '* `member_options={"training": {"tolerance": t}}` (OSGPR\'s `training.tolerance`, the one of the'
        " Adam-stepped models: a fit stops once the best bound per point has changed by less than t per evaluation"
        " over the last `SETTLE_WINDOW`; `onlinegp bench wgpr --member-tolerance t` runs a sweep with it);",
        "* `fresh_start=\"nearest\"` (the ensembles: a fresh member's θ starts at the nearest member's, not at the"
        " prior);",
        "* `early_accept=True` (WGPR: the candidates scored nearest first, the first with w_j < ε kept; an"
        " approximation of Eq. 7, which takes the minimum over all J' candidates).",
    ]


def fast_bound() -> list[str]:
    """What the closed-form gradient of the members' bound (0.7.1) and the fused RBF kernel (0.7.2) did to an
    evaluation, from its benchmark's file."""
    fit = json.loads((PERF_RESULTS / "bench_member_fit.json").read_text())
    s, c = fit["summary"], fit["config"]
    each = fit["summary"]["ratio_per_evaluation_each_batch"]
    kernel = (
        f" {s['kernel_ms_per_evaluation']:.1f} ms with gpytorch's kernel call (0.7.1's; the fused kernel is"
        f" {s['kernel_ratio_per_evaluation']:.2f}x faster) and"
        if "kernel_ms_per_evaluation" in s
        else ""
    )
    return [
        "Since 0.7.1 (after every run on this page) a member's fit evaluates the bound through `StatisticsFit`: one"
        " kernel matrix and the bound's closed-form gradient in one autograd node, the same values and gradients to"
        " round-off; since 0.7.2 an ARD RBF kernel matrix is one autograd node too (`onlinegp.kernels.rbf`)."
        " `benchmarks/perf/bench_member_fit.py` (one WGPR member on this stream, the same state and batch"
        f" for every path, {c['batches']} batches, 1-minute load {c['loadavg_before']:.1f} before and"
        f" {c['loadavg_after']:.1f} after): **{s['fast_ms_per_evaluation']:.1f} ms per evaluation against{kernel}"
        f" {s['plain_ms_per_evaluation']:.1f} ms** through autograd, {s['ratio_per_evaluation']:.2f}x (per batch"
        f" {min(each):.2f}-{max(each):.2f}x). What remains is small dense algebra at M ≤ {2 * c['num_inducing']}"
        " and its per-call overhead; the evaluations per fit, not their cost, are what separates WGPR from the"
        " paper's ratio.",
    ]


def change(r: dict) -> str:
    """A lever's RMSE and members against its plain run's."""
    b = r["before"]
    members = f"{b['num_models']} → {r['num_models']} members"
    return f"{b['rmse']:.3f} → {r['rmse']:.3f} ({pct(r['rmse'], b['rmse'])}; {members})"


def speedup(r: dict) -> str:
    return f"{r['before']['cpu_time'] / r['cpu_time']:.1f}x"


def budget(r: dict) -> str:
    return f"{r['evaluations_per_fit']['mean']:.0f} per fit against {r['before']['evaluations_per_fit']['mean']:.0f}"


def reading(runs: list[dict]) -> list[str]:
    """What the tables say, every number from them."""
    tol4, tol5 = (
        {m: entries(runs, f"{m} tol 1e-4") for m in LABELS},
        {m: entries(runs, f"{m} tol 1e-5") for m in LABELS},
    )
    early, early5 = entries(runs, "wgpr early accept"), entries(runs, "wgpr tol 1e-5 early accept")
    nearest = entries(runs, "wgpr fresh nearest")
    plain = {r["seed"]: r for r in entries(runs, "wgpr")}
    eps = span((r["config"]["params"]["epsilon"] for r in entries(runs, "wgpr")), "{:g}")
    medians = [
        statistics.median(s)
        for r in entries(runs, "wgpr")
        if (s := [x for x in r.get("best_scores", []) if x is not None])
    ]

    def fall(m: str) -> str:
        return f"from {span(r['before']['ratio_cpu'] for r in tol4[m])} to {span(r['ratio_cpu'] for r in tol4[m])}"

    def rmse_moves(m: str) -> str:
        return span((percent(r["rmse"], r["before"]["rmse"]) for r in tol4[m] + tol5[m]), "{:+d}", " to ")

    def trials(rows: list[dict], text) -> str:
        return f"{' / '.join(text(r) for r in rows)} (trial{'s' * (len(rows) > 1)} {' / '.join(str(r['seed']) for r in rows)})"

    return [
        f"Reading it. **The tolerance is the lever that matters**: at 1e-4 WGPR's fits take"
        f" {span((r['evaluations_per_fit']['mean'] for r in tol4['wgpr']), '{:.0f}')} evaluations instead of"
        f" {span((r['before']['evaluations_per_fit']['mean'] for r in tol4['wgpr']), '{:.0f}')} and its CPU time's"
        f" ratio to LGPR falls {fall('wgpr')}, SOLAR-GP's {fall('solar-gp')} and OVFE's {fall('ovfe')}; at 1e-5 the"
        f" fits take {span((r['evaluations_per_fit']['mean'] for m in LABELS for r in tol5[m]), '{:.0f}')}"
        f" evaluations, {span(r['before']['cpu_time'] / r['cpu_time'] for m in LABELS for r in tol5[m])}x faster"
        f" than the plain runs. But it is **not free for WGPR**: its RMSE went {by_seed(tol4['wgpr'], change)} at"
        f" 1e-4, and {by_seed(tol5['wgpr'], change)} at 1e-5. Where the members are as many, the change is the less"
        " converged members themselves; where they are fewer, WGPR split less: the smallest score per update lies"
        f" around ε = {eps} (its median {span(medians)} in the plain runs), so the number of splits moves with small"
        f" changes of the fits. SOLAR-GP's RMSE moved by {rmse_moves('solar-gp')} % and OVFE's, a single OSGPR, by"
        f" {rmse_moves('ovfe')} % at either tolerance. `early_accept` saves"
        f" {span((100 * (1 - r['fits'] / plain[r['seed']]['fits']) for r in early), '{:.0f}')} % of WGPR's fits"
        f" ({span((r['fits'] for r in early), '{}')} against {span((plain[r['seed']]['fits'] for r in early), '{}')})"
        f" at RMSE {trials(early, lambda r: pct(r['rmse'], r['before']['rmse']))}; with the tolerance 1e-5 it is"
        f" {trials(early5, speedup)} faster than the plain run, at RMSE"
        f' {trials(early5, lambda r: pct(r["rmse"], r["before"]["rmse"]))}. `fresh_start="nearest"` saves'
        f" no evaluations ({by_seed(nearest, budget)}:"
        " a fresh fit still runs its budget) and makes the fresh member resemble the candidates, so Eq. 6's second"
        f" term shrinks and WGPR splits less: RMSE {by_seed(nearest, change)}. These {len(plain)} trials on"
        f" {span((r['points'] for r in runs), '{}')} rows cannot tell whether the tolerance's RMSE cost holds over the"
        " whole stream; none of these is a default yet (the kept tables on [the WGPR page](wgpr.md) are the defaults'"
        " numbers). The kin40k sweep with `member_options` set is the test.",
    ]


def render() -> str:
    """The page of ``profile_wgpr.json``: every number in it from the JSON."""
    runs = json.loads((RESULTS / f"{NAME}.json").read_text())["runs"]
    lines = [*intro(runs), "", *where_time_goes(runs)]
    for method in ("wgpr", "solar-gp", "ovfe"):
        lines += ["", f"**{LABELS[method]}**, each lever beside its plain run of the same invocation:", ""]
        lines += method_table(runs, method)
    lines += ["", "**WGPR's wall time by phase** (shares of the training time):", "", *wgpr_phases(runs)]
    lines += ["", "**The other methods' phases:**", "", *other_phases(runs), "", *reading(runs)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=2000, help="training rows streamed (batches of the bench's size)")
    parser.add_argument("--seed", type=int, default=0, help="the trial (split, subsample and model seed)")
    parser.add_argument("--variants", default="wgpr;wgpr tol 1e-4", help="names of VARIANTS separated by semicolons")
    parser.add_argument("--render", action="store_true", help="write docs/results/wgpr-profile.md from the JSON")
    args = parser.parse_args()
    if args.render:
        PAGE.write_text(render())
        print(f"wrote {PAGE}")
        return
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
