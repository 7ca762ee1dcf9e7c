"""``onlinegp bench fleet``: K vehicles against one at an equal total sample budget (:mod:`onlinegp.experiments.simulator.fleet`).

The sweep: fleet sizes (default 1, 2, 4) × coordinations (``joint`` goals, and ``independent`` max-entropy
planners as the baseline; one vehicle has no coordination) × schedules (:data:`BENCH_SCHEDULES`: ``async``, the
default, ``sync``, and ``sync-ksteps``, lock-step epochs with K times the gradient steps; one vehicle has one) ×
fleets (``shared``, one model, the default; ``decentralised``, one POAM per vehicle merged in range, evaluated on
vehicle 0's model: :mod:`onlinegp.experiments.simulator.merge`) ×
environments (the bundled terrains and the POAM
paper's two) × seeds, every run one POAM mission with the settings of Chen et al. 2024's Table I (M = 500, 10
gradient steps per epoch, the Attentive Kernel, the paper's model options, 5000 samples in all, whatever K) on the
fleet simulator, so that even K = 1 records its mission clock. Runs go through :mod:`onlinegp.experiments.bench.runner` and
are kept in the results tree under ``fleet``.

Per run: the final SMSE and MSLL, the SMSE averaged over the mission's evaluations, the number of evaluations
(the pilot survey and each decision epoch), and the mission time (simulated seconds) at which the SMSE first
reaches a target: ``target_smse`` if given,
else the final SMSE of the single vehicle on the same environment and seed (then K = 1 must be in the sweep).
The summary gives mean ± std over seeds per (environment, K, coordination, schedule), the time ratio to K = 1,
paired sign tests on the averaged SMSE (joint against independent goals; each schedule against ``sync``), and
figures of SMSE against samples and against
mission time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...io import write_csv
from ..flags import option
from ..protocols import PAPER_SETTINGS, paper_model_options, sign_test
from ..simulator.fields import PAPER_ENVS, SAMPLE_ENVS, load_field
from ..simulator.mission import COORDINATIONS, FLEETS, SCHEDULES, MissionConfig
from .parse import comma_ints, comma_items
from .poam import (
    SUMMARY_FILES,
    _slug,
    mission_job,
    parse_names,
    parse_seeds,
    read_metrics_csv,
)
from .protocol import Bench, Echo
from .runner import RunSpec, SweepResult, is_finished

TITLE = "fleet"
DEFAULT_ENVS = (*SAMPLE_ENVS, *PAPER_ENVS)


#: the bench's schedules: the mission's two, and ``sync-ksteps``, synchronous with K times the gradient steps per
#: epoch (so that a fleet's hyper-parameters get about as many steps in all as one vehicle's)
BENCH_SCHEDULES = (*SCHEDULES, "sync-ksteps")


def group(robots: int, coordination: str, schedule: str = "sync", fleet: str = "shared") -> str:
    """A run's group name: ``k1`` (one vehicle: every schedule is the same), ``k2-joint-async``,
    ``k4-independent-sync``, ``k4-joint-async-decentralised``."""
    name = "k1" if robots == 1 else f"k{robots}-{coordination}-{schedule}"
    return name if fleet == "shared" or robots == 1 else f"{name}-{fleet}"


def _schedule_options(schedule: str, robots: int, num_steps: int | None) -> dict:
    if schedule == "sync-ksteps":
        return {"schedule": "sync", "num_steps": None if num_steps is None else num_steps * robots}
    return {"schedule": schedule}


def fleet_specs(
    envs: Sequence[str],
    robots: Sequence[int],
    coordinations: Sequence[str],
    seeds: Sequence[int],
    mission: dict,
    schedules: Sequence[str] = ("async",),
    fleets: Sequence[str] = ("shared",),
    decentralised: dict | None = None,
) -> list[RunSpec]:
    """One spec per mission ``<env>/<group>/seed-<k>``; every config validated up front. A shared fleet's config
    leaves ``fleet`` unset (as before the decentralised one: the same run keys); ``decentralised`` holds the
    decentralised fleets' settings (``comm_radius``, ``merge_theta``)."""
    bad = [c for c in coordinations if c not in COORDINATIONS]
    if bad or not coordinations:
        raise ValueError(f"unknown coordination(s) {bad}; choose from {', '.join(COORDINATIONS)}")
    bad = [s for s in schedules if s not in BENCH_SCHEDULES]
    if bad or not schedules:
        raise ValueError(f"unknown schedule(s) {bad}; choose from {', '.join(BENCH_SCHEDULES)}")
    bad = [f for f in fleets if f not in FLEETS]
    if bad or not fleets:
        raise ValueError(f"unknown fleet(s) {bad}; choose from {', '.join(FLEETS)}")
    if not robots or any(int(k) < 1 for k in robots):
        raise ValueError(f"fleet sizes must be positive numbers of vehicles, got {list(robots)}")
    for env in envs:
        load_field(env)
    specs = []
    for env in envs:
        for k in dict.fromkeys(int(k) for k in robots):
            variants = (
                [("joint", "sync", "shared")]
                if k == 1
                else [(c, s, f) for f in fleets for s in schedules for c in coordinations]
            )
            for coordination, schedule, how in variants:
                for seed in seeds:
                    fleet = (
                        {
                            "coordination": coordination,
                            **_schedule_options(schedule, k, mission.get("num_steps")),
                            **({} if how == "shared" else {"fleet": how, **(decentralised or {})}),
                        }
                        if k > 1
                        else {}
                    )
                    config = MissionConfig(
                        **{
                            **mission,
                            "env": env,
                            "seed": int(seed),
                            "robots": k,
                            "model_options": {**paper_model_options("poam"), **mission.get("model_options", {})},
                            **fleet,
                        }
                    )
                    config.validate()
                    run_id = f"{_slug(env)}/{group(k, coordination, schedule, how)}/seed-{seed}"
                    specs.append(RunSpec(run_id, config.resolved().to_dict()))
    return specs


def time_to_reach(columns: dict[str, np.ndarray], target: float) -> float:
    """The mission clock (s) at the first evaluation with SMSE at or below ``target``; NaN if it never does."""
    hit = np.flatnonzero(columns["smse"] <= target)
    return float(columns["mission_clock"][hit[0]]) if len(hit) else math.nan


def per_run(root: Path, specs: Sequence[RunSpec], target_smse: float | None) -> list[dict[str, Any]]:
    """One row per finished run: environment, K, coordination, seed, final/averaged metrics, time to the target."""
    rows = []
    for spec in specs:
        if not is_finished(root / spec.run_id, spec):
            continue
        env, name, seed = spec.run_id.split("/")
        c = read_metrics_csv(root / spec.run_id / "metrics.csv")
        fleet = spec.config.get("fleet") or "shared"
        _, coordination, schedule = (name.removesuffix(f"-{fleet}").split("-", 2) + ["", ""])[:3]
        rows.append(
            {
                "env": env,
                "group": name,
                "robots": int(spec.config["robots"]),
                "coordination": coordination,
                "schedule": schedule,
                "fleet": fleet,
                "seed": int(seed.removeprefix("seed-")),
                "final_smse": float(c["smse"][-1]),
                "final_msll": float(c["msll"][-1]),
                "averaged_smse": float(np.mean(c["smse"])),
                "num_samples": int(c["num_samples"][-1]),
                "mission_clock": float(c["mission_clock"][-1]),
                "evaluations": len(c["smse"]),
                "_columns": c,
            }
        )
    single = {(r["env"], r["seed"]): r for r in rows if r["robots"] == 1}
    for r in rows:
        reference = single.get((r["env"], r["seed"]))
        target = target_smse if target_smse is not None else None if reference is None else reference["final_smse"]
        r["target_smse"] = math.nan if target is None else target
        r["time_to_target"] = math.nan if target is None else time_to_reach(r["_columns"], target)
        k1_time = math.nan if reference is None or target is None else time_to_reach(reference["_columns"], target)
        r["time_ratio_to_k1"] = r["time_to_target"] / k1_time if k1_time and not math.isnan(k1_time) else math.nan
    return rows


#: the columns that need a target SMSE
TARGET_COLUMNS = ("time_to_target", "time_ratio_to_k1")
SUMMARY_COLUMNS = (
    "final_smse",
    "final_msll",
    "averaged_smse",
    "time_to_target",
    "time_ratio_to_k1",
    "mission_clock",
    "evaluations",
)


def summarise(rows: Sequence[dict]) -> list[dict[str, Any]]:
    """Mean and std over seeds per (environment, group); NaN left out: a run that never reached its target, or one
    with no target (no K = 1 run of its environment and seed in the sweep, and no ``--target-smse``), counted apart
    (``{key}_targets``: the runs that had one)."""
    table = []
    for env in dict.fromkeys(r["env"] for r in rows):
        for name in dict.fromkeys(r["group"] for r in rows if r["env"] == env):
            runs = [r for r in rows if (r["env"], r["group"]) == (env, name)]
            row: dict[str, Any] = {"env": env, "group": name, "seeds": len(runs)}
            with_target = sum(not math.isnan(r["target_smse"]) for r in runs)
            for key in SUMMARY_COLUMNS:
                values = np.array([r[key] for r in runs], dtype=np.float64)
                kept = values[~np.isnan(values)]
                row[f"{key}_mean"] = float(kept.mean()) if len(kept) else math.nan
                row[f"{key}_std"] = float(kept.std()) if len(kept) else math.nan
                row[f"{key}_runs"] = len(kept)
                row[f"{key}_targets"] = with_target if key in TARGET_COLUMNS else len(runs)
            table.append(row)
    return table


def paired_comparisons(rows: Sequence[dict]) -> list[dict[str, Any]]:
    """Sign tests on the averaged SMSE, paired by environment and seed: joint against independent goals per fleet
    size and schedule, and each schedule against ``sync`` per fleet size and coordination (shared fleets), and
    decentralised against shared fleets per fleet size, coordination and schedule."""
    key = lambda r, fleet: (r["env"], r["robots"], r["coordination"], r["schedule"], r["seed"], fleet)  # noqa: E731
    everything = {key(r, r["fleet"]): r for r in rows if r["robots"] > 1}
    tests: dict[tuple, list[tuple[dict, dict]]] = {}
    for (env, k, how, when, seed, fleet), row in everything.items():
        if fleet != "shared" and (rival := everything.get((env, k, how, when, seed, "shared"))):
            tests.setdefault((k, f"{fleet} vs shared ({how}, {when})"), []).append((row, rival))
    by = {k[:5]: r for k, r in everything.items() if k[5] == "shared"}
    for (env, k, how, when, seed), row in by.items():
        if how == "joint" and (rival := by.get((env, k, "independent", when, seed))):
            tests.setdefault((k, f"joint vs independent ({when})"), []).append((row, rival))
        if when != "sync" and (rival := by.get((env, k, how, "sync", seed))):
            tests.setdefault((k, f"{when} vs sync ({how})"), []).append((row, rival))
    out = []
    for (k, comparison), pairs in sorted(tests.items()):
        wins = sum(a["averaged_smse"] < b["averaged_smse"] for a, b in pairs)
        losses = sum(a["averaged_smse"] > b["averaged_smse"] for a, b in pairs)
        out.append(
            {
                "robots": k,
                "comparison": comparison,
                "wins": wins,
                "losses": losses,
                "ties": len(pairs) - wins - losses,
                "sign_test_p": sign_test(wins, losses),
            }
        )
    return out


def _fmt(row: dict, key: str) -> str:
    mean, std = row[f"{key}_mean"], row[f"{key}_std"]
    targets = row[f"{key}_targets"]
    never, untargeted = targets - row[f"{key}_runs"], row["seeds"] - targets
    notes = ([f"{never} never"] if never else []) + ([f"{untargeted} without K = 1"] if untargeted else [])
    return ("–" if math.isnan(mean) else f"{mean:.3g} ± {std:.2g}") + (f" ({', '.join(notes)})" if notes else "")


def write_report(root: Path, rows: Sequence[dict], caption: str) -> dict[str, Path]:
    """runs.csv, summary.csv/md, paired.csv and the curves (SMSE against samples and against mission time)."""
    from ..plots import plot_sweep_curves

    files = {"runs_csv": write_csv(root / "runs.csv", [{k: v for k, v in r.items() if k != "_columns"} for r in rows])}
    table = summarise(rows)
    files["summary_csv"] = write_csv(root / "summary.csv", table)
    paired = paired_comparisons(rows)
    headers = [
        "Final SMSE",
        "Final MSLL",
        "Averaged SMSE",
        "Time to target (s)",
        "Time / K=1's",
        "Mission time (s)",
        "Evaluations",
    ]
    lines = [
        "*A fleet maps one field: K vehicles, one POAM model, equal total samples*",
        "",
        caption,
        "",
        "| Environment | Fleet | Seeds | " + " | ".join(headers) + " |",
        "|---|---|---|" + "---|" * len(headers),
    ]
    lines += [
        f"| {r['env']} | {r['group']} | {r['seeds']} | " + " | ".join(_fmt(r, k) for k in SUMMARY_COLUMNS) + " |"
        for r in table
    ]
    if paired:
        files["paired_csv"] = write_csv(root / "paired.csv", paired)
        lines += ["", "Averaged SMSE, paired by environment and seed (better: the first is lower):", ""]
        lines += ["| K | Comparison | Better | Worse | Ties | Sign test p |", "|---|---|---|---|---|---|"]
        lines += [
            f"| {p['robots']} | {p['comparison']} | {p['wins']} | {p['losses']} | {p['ties']} | "
            f"{p['sign_test_p']:.3g} |"
            for p in paired
        ]
    files["summary_md"] = root / "summary.md"
    files["summary_md"].write_text("\n".join(lines) + "\n")
    for x_key, name in (("num_samples", "samples"), ("mission_clock", "mission time (s)")):
        panels: dict[tuple[str, str], dict[str, dict]] = {}
        for (env, gname), runs in _groups(rows).items():
            panels.setdefault(("smse", env), {})[gname] = _mean_curve([r["_columns"] for r in runs], x_key)
        path = root / f"fleet-smse-vs-{x_key.replace('_', '-')}.png"
        files[f"curves_{x_key}"] = plot_sweep_curves(panels, path, title="SMSE (mean ± std over seeds)", xlabel=name)
    return files


def _groups(rows: Sequence[dict]) -> dict[tuple[str, str], list[dict]]:
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["env"], r["group"]), []).append(r)
    return groups


def _mean_curve(runs: Sequence[dict[str, np.ndarray]], x_key: str, num_points: int = 100) -> dict[str, np.ndarray]:
    """SMSE against ``x_key``, mean ± std over runs, interpolated on the span every run covers."""
    lo = max(float(c[x_key][0]) for c in runs)
    hi = min(float(c[x_key][-1]) for c in runs)
    grid = np.linspace(lo, hi, num_points) if hi > lo else np.array([hi])
    values = np.stack([np.interp(grid, c[x_key], c["smse"]) for c in runs])
    return {"samples": grid, "mean": values.mean(0), "std": values.std(0)}


@dataclass(frozen=True)
class FleetOptions:
    """``onlinegp bench fleet``: the environments, fleet sizes, coordinations, schedules (:data:`BENCH_SCHEDULES`)
    and fleets (decentralised ones with ``comm_radius`` and ``merge_theta``, None: the mission's) of the sweep, its
    seeds (e.g. ``"0-4"``), the missions' total samples, M, gradient steps per epoch and simulator profile; the SMSE
    whose mission time is reported (None: K = 1's final SMSE, same environment and seed)."""

    envs: Sequence[str] = option(
        DEFAULT_ENVS,
        "comma-separated environments (default: the bundled terrains and the POAM paper's two)",
        parse=comma_items,
    )
    robots: Sequence[int] = option((1, 2, 4), "comma-separated fleet sizes K", parse=comma_ints)
    coordinations: Sequence[str] = option(
        COORDINATIONS, "how fleets of K > 1 choose goals: joint and/or independent", parse=comma_items
    )
    schedules: Sequence[str] = option(
        ("async",),
        "when fleets of K > 1 replan: sync, async and/or sync-ksteps (sync with K times --num-steps per epoch)",
        parse=comma_items,
    )
    fleets: Sequence[str] = option(
        ("shared",),
        "how fleets of K > 1 keep their map: shared (one model) and/or decentralised (one POAM per vehicle, merged "
        "in range)",
        parse=comma_items,
    )
    comm_radius: float | None = option(None, "decentralised fleets' radius (m; as the mission's)", cli_type=float)
    merge_theta: str | None = option(None, "decentralised fleets' θ at a merge (as the mission's)", cli_type=str)
    seeds: str = option("0-4", "seeds, e.g. 0-4, 0,3 or 0-2,7")
    budget: int = option(5000, "samples per mission, all vehicles together")
    num_inducing: int = option(500, "inducing points M")
    num_steps: int = option(10, "gradient steps per decision epoch")
    target_smse: float | None = option(
        None, "SMSE whose mission time is reported (default: K = 1's final SMSE, same seed)", cli_type=float
    )
    profile: str = option("paper", "simulator settings: paper or reference-code")


def specs(options: FleetOptions) -> list[RunSpec]:
    """The sweep's missions (:func:`fleet_specs`) at Table I's settings with ``options``' budget, M and steps."""
    o = options
    if o.target_smse is not None and not o.target_smse > 0:
        raise ValueError(f"target_smse must be positive, got {o.target_smse}")
    mission = {**PAPER_SETTINGS, "budget": o.budget, "num_inducing": o.num_inducing, "num_steps": o.num_steps}
    decentralised = {"comm_radius": o.comm_radius, "merge_theta": o.merge_theta}
    return fleet_specs(
        parse_names(list(o.envs), "environment"),
        o.robots,
        o.coordinations,
        parse_seeds(o.seeds),
        {**mission, "profile": o.profile},
        list(o.schedules),
        list(o.fleets),
        {k: v for k, v in decentralised.items() if v is not None},
    )


def summarise_sweep(root: Path, sweep: SweepResult, options: FleetOptions, quiet: bool, log: Echo) -> dict[str, Path]:
    """Write the sweep's report to ``root``; returns the written files."""
    o = options
    for failed in sweep.failed:
        log(f"run {failed.run_id} failed: {failed.error}")
    rows = per_run(root, sweep.specs, o.target_smse)
    if not rows:
        raise ValueError(f"no run of the sweep finished (see {root})")
    target = (
        f"SMSE {o.target_smse:g}"
        if o.target_smse is not None
        else "the single vehicle's final SMSE (same environment and seed)"
    )
    caption = (
        f"POAM, M = {o.num_inducing}, {o.num_steps} gradient steps per epoch (sync-ksteps: K times that), schedules "
        f"{', '.join(o.schedules)}, fleets {', '.join(o.fleets)} (decentralised: vehicle 0's model), the Attentive Kernel, {o.budget} samples in "
        f"all per mission, profile {o.profile}, seeds {o.seeds}. Mission time is the simulated time (s) until the budget is "
        f"spent (sync: the epochs' durations, each its slowest vehicle's); time to target: when the SMSE first reaches {target}; cells: mean ± std over seeds (runs that "
        "never reach it left out and counted)."
    )
    files = write_report(root, rows, caption)
    if not quiet:
        log(files["summary_md"].read_text())
        log("wrote " + ", ".join(str(p) for p in files.values()))
        if sweep.results is not None:
            log(f"run summaries kept in {sweep.results}")
    return files


#: the ``onlinegp bench`` command of this module (:mod:`onlinegp.experiments.bench.protocol`)
BENCHES = {
    TITLE: Bench(
        TITLE,
        FleetOptions,
        specs,
        mission_job,
        summarise_sweep,
        summary=SUMMARY_FILES,
        description="Multi-robot active mapping: K = 1, 2, 4 vehicles, one POAM model, equal total samples; final "
        "SMSE/MSLL and the mission time to reach K = 1's final SMSE, joint against independent goals.",
    )
}
