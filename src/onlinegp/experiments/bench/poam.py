"""The experiments of Chen et al. 2024 (POAM, §V and appendix B) as sweeps of active-mapping missions.

* ``poam-table1`` (:class:`Table1Options`): SSGP++, OVC, OVC++, POAM and FULL with the Attentive Kernel, M = 500, 10
  gradient steps per epoch, on the paper's own Env2 and Env3 (``paper-env2``, ``paper-env3``), seeds 0-9 (Table I, Fig.
  5 and Fig. 7).
* ``poam-ablation`` (:class:`AblationOptions`): POAM and its ablations Z-OPT, Z-RAND, Z-KMEANS, VAR-OPT, VAR-SSGP,
  ONLINE-ELBO in Env1 (Fig. 8).
* ``poam-robustness`` (:class:`RobustnessOptions`): random initialisation with the max-entropy planner, and random
  initialisation with the random planner, SSGP++, OVC, OVC++, POAM and FULL (appendix B, Fig. 9).

Every experiment pins the settings of the paper's implementation: besides M, steps, kernel and budget, the Gaussian
likelihood starts at σ² = 1.0, POAM's family runs the exact M-step and OVC steps Z with θ's Adam (:func:`paper_model_options`;
``paper_options=False`` leaves the library's defaults; explicit ``model_options`` win).

Each run is one mission (:func:`onlinegp.experiments.simulator.run.run_mission`) in its own directory
``<out>/[<setting>/]<env>/<method>/seed-<k>``; the runner (:mod:`onlinegp.experiments.bench.runner`) executes them locally or on
Ray and skips finished ones; a run's small files (:data:`SUMMARY_FILES`) are what the tables and figures read, and
what the runner keeps in the committed results tree (``results/<experiment>/``). The summary follows Table I: for every run the SMSE, MSLL and update time are averaged
over all its evaluations (every decision epoch, the pilot survey included); the table shows the mean ± standard
deviation (numpy's, ddof = 0) over seeds with the minimum as subscript and the maximum as superscript.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ...io import atomic_write, write_csv
from ..flags import option
from ..protocols import PAPER_SETTINGS, paper_model_options, sign_test
from ..simulator.fields import DEFAULT_ENV, ENVIRONMENTS, PAPER_ENVS, SAMPLE_ENVS, load_field
from ..simulator.mission import MissionConfig, lengthscale_grid
from ..simulator.run import open_mission, run_mission
from .parse import parse_names, parse_seeds
from .protocol import Bench, Echo
from .runner import MARKER, RunSpec, SweepResult, is_finished

TABLE1_METHODS = ("ssgp++", "ovc", "ovc++", "poam", "full")
ABLATION_METHODS = ("poam", "z-opt", "z-rand", "z-kmeans", "var-opt", "var-ssgp", "online-elbo")
ROBUSTNESS_METHODS = ("ssgp++", "ovc", "ovc++", "poam", "full")
ROBUSTNESS_SETTINGS = {
    "random-init": {"init": "random", "planner": "max-entropy"},
    "random-planner": {"init": "random", "planner": "random"},
}
SUMMARY_KEYS = ("smse", "msll", "update_time")
HEADERS = {"smse": "Averaged SMSE ↓", "msll": "Averaged MSLL ↓", "update_time": "Averaged update time (s) ↓"}
FINAL_KEYS = ("smse", "msll")
FINAL_HEADERS = {"smse": "Final SMSE ↓", "msll": "Final MSLL ↓"}
LABELS = {"ssgp++": "SSGP++", "ovc": "OVC", "ovc++": "OVC++", "poam": "POAM", "full": "FULL"}
LENGTHSCALE_FILE = "lengthscale.npz"
LENGTHSCALE_RESOLUTION = 60
#: a run's files that the summary and figures read (kept in the results tree; not the model, checkpoint or survey)
SUMMARY_FILES = ("config.json", "metrics.csv", LENGTHSCALE_FILE)


def label(method: str) -> str:
    """The paper's name for a method: 'POAM', 'SSGP++', ablations as 'POAM-Z-OPT'."""
    return LABELS.get(method, f"POAM-{method.upper()}" if method in ABLATION_METHODS else method.upper())


# ---------------------------------------------------------------------- the sweep
@dataclass
class Experiment:
    """A grid of missions: ``settings`` (name → mission overrides; a single '' setting adds no directory level)
    × environments × methods × seeds, all sharing ``mission`` (MissionConfig fields)."""

    name: str
    title: str
    envs: list[str]
    methods: list[str]
    seeds: list[int]
    mission: dict = field(default_factory=dict)
    settings: dict[str, dict] = field(default_factory=lambda: {"": {}})
    paper_options: bool = True

    def specs(self) -> list[RunSpec]:
        """One run spec per mission; validates every config (unknown model, planner, environment) up front."""
        for env in self.envs:
            load_field(env)
        specs = []
        for setting, overrides in self.settings.items():
            for env in self.envs:
                for method in self.methods:
                    for seed in self.seeds:
                        model_options = {
                            **(paper_model_options(method) if self.paper_options else {}),
                            **self.mission.get("model_options", {}),
                            **overrides.get("model_options", {}),
                        }
                        try:
                            config = MissionConfig(
                                **{
                                    **self.mission,
                                    **overrides,
                                    "env": env,
                                    "model": method,
                                    "seed": int(seed),
                                    "model_options": model_options,
                                }
                            )
                        except TypeError as err:
                            raise ValueError(f"unknown mission option: {err}") from err
                        config.validate()
                        parts = [setting] if setting else []
                        specs.append(
                            RunSpec("/".join([*parts, _slug(env), method, f"seed-{seed}"]), config.resolved().to_dict())
                        )
        return specs


def _slug(env: str) -> str:
    return env if env.lower() in ENVIRONMENTS else Path(env).stem


def mission_job(config: dict, run_dir: Path) -> dict:
    """Runner job: one mission into ``run_dir``, resuming the checkpoint of an interrupted attempt; a directory
    that holds a finished run of other settings (the runner only calls this when the config changed) starts afresh."""
    mission = open_mission(MissionConfig.from_record(config), run_dir, resume=not is_finished(run_dir))
    result = run_mission(mission, run_dir, quiet=True)
    write_lengthscales(mission, run_dir / LENGTHSCALE_FILE)
    return {k: result.final[k] for k in ("num_samples", "smse", "msll", "rmse")}


def write_lengthscales(mission: Any, path: Path) -> None:
    """Fig. 7's data of a finished mission, small enough to commit: the learnt length-scale on a
    :data:`LENGTHSCALE_RESOLUTION`² grid of the task extent and the inducing inputs (nothing for models without a
    length-scale)."""
    grid = mission.field.grid(LENGTHSCALE_RESOLUTION, tuple(mission.config.task_extent))
    ls = lengthscale_grid(mission.model, grid)
    if ls is None:
        return
    Z = getattr(mission.model, "inducing_inputs", None)
    arrays = {"lengthscale": ls.reshape(LENGTHSCALE_RESOLUTION, LENGTHSCALE_RESOLUTION).astype(np.float32)}
    if Z is not None:
        arrays["inducing"] = np.asarray(Z.detach(), dtype=np.float32)
    atomic_write(path, lambda fh: np.savez_compressed(fh, **arrays))


# ---------------------------------------------------------------------- reading runs back
@dataclass
class RunRecord:
    """One finished run: its grouping keys and its per-epoch metrics (column → array)."""

    setting: str
    env: str
    method: str
    seed: int
    run_dir: Path
    columns: dict[str, np.ndarray]
    code: str | None = None

    def averaged(self, key: str) -> float:
        return float(np.mean(self.columns[key]))


def read_metrics_csv(path: Path) -> dict[str, np.ndarray]:
    """A mission's metrics.csv as column → float array (empty cells, e.g. no inducing count, become NaN)."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        raise ValueError(f"{path} has no metric rows")
    return {k: np.array([float(r[k]) if r[k] not in ("", "None") else np.nan for r in rows]) for k in rows[0]}


def collect(root: Path, specs: Sequence[RunSpec]) -> list[RunRecord]:
    """The finished runs of ``specs`` under ``root`` (unfinished and failed ones are left out)."""
    records = []
    for spec in specs:
        run_dir = Path(root) / spec.run_id
        if not is_finished(run_dir, spec):
            continue
        parts = spec.run_id.split("/")
        setting = parts[0] if len(parts) == 4 else ""  # <setting>/<env>/<method>/seed-<k> or <env>/<method>/seed-<k>
        c = spec.config
        records.append(
            RunRecord(
                setting,
                _slug(c["env"]),
                c["model"],
                int(c["seed"]),
                run_dir,
                read_metrics_csv(run_dir / "metrics.csv"),
                json.loads((run_dir / MARKER).read_text()).get("code"),
            )
        )
    return records


def _groups(records: Sequence[RunRecord]) -> dict[tuple[str, str, str], list[RunRecord]]:
    groups: dict[tuple[str, str, str], list[RunRecord]] = {}
    for r in records:
        groups.setdefault((r.setting, r.env, r.method), []).append(r)
    return groups


def summarise(
    records: Sequence[RunRecord], keys: Sequence[str] = SUMMARY_KEYS, final: bool = False
) -> list[dict[str, Any]]:
    """Table I: per (setting, env, method), each key averaged over a run's epochs (``final``: its value at the run's
    last evaluation), then mean/std/min/max over seeds."""
    table = []
    for (setting, env, method), runs in _groups(records).items():
        row: dict[str, Any] = {"setting": setting, "env": env, "method": method, "seeds": len(runs)}
        for key in keys:
            per_run = np.array([float(r.columns[key][-1]) if final else r.averaged(key) for r in runs])
            row.update(
                {
                    f"{key}_mean": float(per_run.mean()),
                    f"{key}_std": float(per_run.std()),
                    f"{key}_min": float(per_run.min()),
                    f"{key}_max": float(per_run.max()),
                }
            )
        table.append(row)
    return table


def _cell(row: dict, key: str, bold: bool) -> str:
    mean = f"{row[f'{key}_mean']:.3g}"
    text = (
        f"{'**' + mean + '**' if bold else mean} ± {row[f'{key}_std']:.2g} "
        f"<sub>{row[f'{key}_min']:.3g}</sub><sup>{row[f'{key}_max']:.3g}</sup>"
    )
    return text


def write_summary(
    table: Sequence[dict],
    out: Path,
    name: str,
    title: str,
    caption: str,
    keys: Sequence[str] = SUMMARY_KEYS,
    headers: dict[str, str] = HEADERS,
) -> dict[str, Path]:
    """``<name>.csv`` (every statistic) and ``<name>.md`` (Table I's layout; the best mean per environment in bold;
    the title in italics, not a heading, so that a results page can show the file as it is)."""
    out.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out / f"{name}.csv", out / f"{name}.md"
    columns = ["setting", "env", "method", "seeds"] + [f"{k}_{s}" for k in keys for s in ("mean", "std", "min", "max")]
    write_csv(csv_path, table, columns)
    settings = list(dict.fromkeys(r["setting"] for r in table))
    lines = [f"*{title}*", "", caption, ""]
    for setting in settings:
        rows = [r for r in table if r["setting"] == setting]
        if setting:
            lines += [f"## {setting}", ""]
        lines += [
            "| Environment | Method | Seeds | " + " | ".join(headers.get(k, k) for k in keys) + " |",
            "|---|---|---|" + "---|" * len(keys),
        ]
        for env in dict.fromkeys(r["env"] for r in rows):
            env_rows = [r for r in rows if r["env"] == env]
            best = {k: min(r[f"{k}_mean"] for r in env_rows) for k in keys}
            for r in env_rows:
                cells = [_cell(r, k, len(env_rows) > 1 and r[f"{k}_mean"] == best[k]) for k in keys]
                lines.append(f"| {env} | {label(r['method'])} | {r['seeds']} | " + " | ".join(cells) + " |")
        lines.append("")
    md_path.write_text("\n".join(lines))
    return {f"{name}_csv": csv_path, f"{name}_md": md_path}


#: Chen et al. 2024, Table I, on the two of its terrains bundled here: (mean, std) over its 10 runs of the averaged
#: SMSE, averaged MSLL and averaged time per decision epoch (s, its machine)
PAPER_TABLE1: dict[str, dict[str, dict[str, tuple[float, float]]]] = {
    "paper-env2": {
        "ssgp++": {"smse": (0.0840, 0.0045), "msll": (-1.34, 0.04), "update_time": (1.57, 0.02)},
        "ovc": {"smse": (0.0935, 0.0038), "msll": (-1.13, 0.01), "update_time": (1.18, 0.01)},
        "ovc++": {"smse": (0.0839, 0.0020), "msll": (-1.30, 0.01), "update_time": (0.853, 0.012)},
        "poam": {"smse": (0.0773, 0.0028), "msll": (-1.46, 0.04), "update_time": (0.843, 0.006)},
    },
    "paper-env3": {
        "ssgp++": {"smse": (0.168, 0.011), "msll": (-1.06, 0.05), "update_time": (1.58, 0.03)},
        "ovc": {"smse": (0.174, 0.006), "msll": (-0.882, 0.013), "update_time": (1.18, 0.01)},
        "ovc++": {"smse": (0.172, 0.005), "msll": (-1.03, 0.04), "update_time": (0.850, 0.012)},
        "poam": {"smse": (0.162, 0.009), "msll": (-1.14, 0.02), "update_time": (0.846, 0.011)},
    },
}


def paper_tolerance(key: str, mean: float, std: float) -> float:
    """How far from the paper's mean a cell of ours may lie and still count as reproducing it: 2 paper std plus 3% of
    its mean (SMSE) or plus 0.03 (MSLL)."""
    return 2.0 * std + (0.03 if key == "msll" else 0.03 * abs(mean))


def write_paper_comparison(table: Sequence[dict], out: Path) -> dict[str, Path]:
    """``paper.md``/``paper.csv``: every cell of ours on the paper's terrains beside the paper's Table I cell, the
    difference in the paper's standard deviations, whether it lies within :func:`paper_tolerance`, and each method's
    time per epoch as a ratio to POAM's in the same sweep beside the paper's ratio."""
    rows = []
    for r in table:
        paper = PAPER_TABLE1.get(r["env"], {}).get(r["method"])
        if paper is None or r["setting"]:
            continue
        poam = next((q for q in table if q["env"] == r["env"] and q["method"] == "poam" and not q["setting"]), None)
        row: dict[str, Any] = {"env": r["env"], "method": r["method"], "seeds": r["seeds"]}
        for key in FINAL_KEYS:
            mean, std = paper[key]
            diff = r[f"{key}_mean"] - mean
            row.update(
                {
                    f"{key}_ours": r[f"{key}_mean"],
                    f"{key}_ours_std": r[f"{key}_std"],
                    f"{key}_paper": mean,
                    f"{key}_paper_std": std,
                    f"{key}_sigmas": diff / std if std > 0 else float("nan"),
                    f"{key}_within": abs(diff) <= paper_tolerance(key, mean, std),
                }
            )
        row["time_ratio_ours"] = r["update_time_mean"] / poam["update_time_mean"] if poam else float("nan")
        row["time_ratio_paper"] = paper["update_time"][0] / PAPER_TABLE1[r["env"]]["poam"]["update_time"][0]
        rows.append(row)
    if not rows:
        return {}
    csv_path, md_path = out / "paper.csv", out / "paper.md"
    write_csv(csv_path, rows, list(rows[0]))
    lines = [
        "*Ours beside Chen et al. 2024, Table I (mean ± std over seeds; paper: over its 10 runs)*",
        "",
        "Δ/σ: our mean minus the paper's, in the paper's standard deviations. ✓: within the paper's mean ± (2 std + 3% "
        "of the mean; + 0.03 for MSLL). Time: each method's averaged update time as a ratio to POAM's, ours (same "
        "sweep, same machine) beside the paper's.",
        "",
        "| Environment | Method | Seeds | SMSE, ours | SMSE, paper | Δ/σ | | MSLL, ours | MSLL, paper | Δ/σ | | "
        "time / POAM's, ours | paper |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        cells = []
        for key, digits in (("smse", 4), ("msll", 3)):
            cells += [
                f"{row[f'{key}_ours']:.{digits}f} ± {row[f'{key}_ours_std']:.{digits}f}",
                f"{row[f'{key}_paper']:.{digits}f} ± {row[f'{key}_paper_std']:.{digits}f}",
                f"{row[f'{key}_sigmas']:+.1f}",
                "✓" if row[f"{key}_within"] else "✗",
            ]
        ours = row["time_ratio_ours"]  # nan where the sweep ran no POAM to divide by
        cells += ["–" if np.isnan(ours) else f"{ours:.2f}", f"{row['time_ratio_paper']:.2f}"]
        lines.append(f"| {row['env']} | {label(row['method'])} | {row['seeds']} | " + " | ".join(cells) + " |")
    md_path.write_text("\n".join([*lines, ""]))
    return {"paper_csv": csv_path, "paper_md": md_path}


def write_per_run(records: Sequence[RunRecord], path: Path, keys: Sequence[str] = SUMMARY_KEYS) -> Path:
    """One row per finished run with its epoch-averaged metrics and final SMSE/MSLL (the table's raw numbers)."""
    columns = [
        "setting",
        "env",
        "method",
        "seed",
        *[f"averaged_{k}" for k in keys],
        "final_smse",
        "final_msll",
        "num_samples",
        "epochs",
        "run_dir",
    ]
    rows = [
        [
            r.setting,
            r.env,
            r.method,
            r.seed,
            *[r.averaged(k) for k in keys],
            r.columns["smse"][-1],
            r.columns["msll"][-1],
            int(r.columns["num_samples"][-1]),
            len(r.columns["smse"]),
            str(r.run_dir),
        ]
        for r in records
    ]
    return write_csv(path, [dict(zip(columns, row)) for row in rows], columns)


def paired_comparisons(
    records: Sequence[RunRecord], reference: str = "poam", keys: Sequence[str] = ("smse", "msll")
) -> list[dict[str, Any]]:
    """``reference`` against every other method, run by run on the same (setting, environment, seed): wins
    (``reference``'s epoch-averaged metric lower), losses, ties, per environment and over all environments, with the
    sign test's p-value. Seeds without both runs are left out."""
    by_key = {(r.setting, r.env, r.method, r.seed): r for r in records}
    rows = []
    for setting in dict.fromkeys(r.setting for r in records):
        envs = list(dict.fromkeys(r.env for r in records if r.setting == setting))
        others = [m for m in dict.fromkeys(r.method for r in records if r.setting == setting) if m != reference]
        for other in others:
            for key in keys:
                total = [0, 0, 0]
                for env in [*envs, "all"]:
                    counts = [0, 0, 0]
                    for (s, e, m, seed), ref in by_key.items():
                        if (s, m) != (setting, reference) or (env != "all" and e != env):
                            continue
                        rival = by_key.get((setting, e, other, seed))
                        if rival is None:
                            continue
                        a, b = ref.averaged(key), rival.averaged(key)
                        counts[0 if a < b else 1 if a > b else 2] += 1
                    if env == "all":
                        counts = total
                    else:
                        total = [t + c for t, c in zip(total, counts)]
                    if sum(counts):
                        rows.append(
                            {
                                "setting": setting,
                                "env": env,
                                "reference": reference,
                                "other": other,
                                "metric": key,
                                "wins": counts[0],
                                "losses": counts[1],
                                "ties": counts[2],
                                "sign_test_p": sign_test(counts[0], counts[1]),
                            }
                        )
    return rows


def write_paired(rows: Sequence[dict], out: Path, name: str = "paired") -> dict[str, Path]:
    """``<name>.csv`` and ``<name>.md``: the reference's wins/losses/ties against each method, with p-values."""
    csv_path, md_path = out / f"{name}.csv", out / f"{name}.md"
    write_csv(csv_path, rows, list(rows[0]) if rows else ["setting"])
    lines = [
        "| Setting | Environment | Comparison | Metric | Wins | Losses | Ties | Sign test p |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        env = "**all**" if r["env"] == "all" else r["env"]
        lines.append(
            f"| {r['setting'] or '-'} | {env} | {label(r['reference'])} vs {label(r['other'])} | "
            f"{HEADERS.get(r['metric'], r['metric']).split(' ↓')[0]} | {r['wins']} | {r['losses']} | {r['ties']} | "
            f"{r['sign_test_p']:.3g} |"
        )
    md_path.write_text("\n".join(lines) + "\n")
    return {"paired_csv": csv_path, "paired_md": md_path}


# ---------------------------------------------------------------------- figures
def curves(records: Sequence[RunRecord], key: str, num_points: int = 100) -> dict[tuple[str, str, str], dict]:
    """Fig. 5's curves: per group, ``key`` against samples over seeds, as mean ± std, or for a time (a ``*_time``
    key: positive and skewed, where mean - std falls below zero) as the median and the interquartile band.

    Runs evaluate at different sample counts, so each run's curve is interpolated linearly onto a common grid
    spanning the sample counts every run of the group covers.
    """
    out = {}
    for group, runs in _groups(records).items():
        lo = max(float(r.columns["num_samples"][0]) for r in runs)
        hi = min(float(r.columns["num_samples"][-1]) for r in runs)
        grid = np.linspace(lo, hi, num_points) if hi > lo else np.array([hi])
        values = np.stack([np.interp(grid, r.columns["num_samples"], r.columns[key]) for r in runs])
        if key.endswith("_time"):
            low, centre, high = np.quantile(values, (0.25, 0.5, 0.75), axis=0)
            spread = {"centre": centre, "low": low, "high": high, "band": "median, 25-75% of seeds"}
        else:
            spread = {"mean": values.mean(0), "std": values.std(0)}
        out[group] = {"samples": grid, **spread, "seeds": len(runs)}
    return out


def curve_figures(records: Sequence[RunRecord], out: Path, keys: Sequence[str], prefix: str) -> dict[str, Path]:
    """One figure per setting: rows are ``keys``, columns environments, a line and band per method (:func:`curves`)."""
    from ..plots import plot_sweep_curves

    files = {}
    per_key = {k: curves(records, k) for k in keys}
    for setting in dict.fromkeys(r.setting for r in records):
        panels = {
            (key, env): {label(m): c for (s, e, m), c in per_key[key].items() if s == setting and e == env}
            for key in keys
            for env in dict.fromkeys(r.env for r in records if r.setting == setting)
        }
        name = f"{prefix}{'-' + setting if setting else ''}"
        files[name] = plot_sweep_curves(panels, out / f"{name}.png", title=f"{name} (over seeds)")
    return files


def lengthscale_figure(records: Sequence[RunRecord], specs: Sequence[RunSpec], root: Path, path: Path) -> Path | None:
    """Fig. 7: ground truth per environment and each method's learnt length-scale map with its inducing inputs,
    from the lowest seed's :data:`LENGTHSCALE_FILE`. Methods without a length-scale (non-AK kernels) are left out."""
    from ..plots import plot_lengthscale_grid

    config_of = {spec.run_id: spec.config for spec in specs}
    first: dict[tuple[str, str], RunRecord] = {}
    for r in sorted(records, key=lambda r: r.seed):
        if r.setting == records[0].setting:
            first.setdefault((r.env, r.method), r)
    truths, maps = {}, {}
    n = LENGTHSCALE_RESOLUTION
    for (env, method), r in first.items():
        config = MissionConfig.from_record(config_of[r.run_dir.relative_to(root).as_posix()])
        fld = load_field(config.env)
        truths.setdefault(env, (fld(fld.grid(n, tuple(config.task_extent))).reshape(n, n), list(config.task_extent)))
        if not (r.run_dir / LENGTHSCALE_FILE).is_file():
            continue
        with np.load(r.run_dir / LENGTHSCALE_FILE) as saved:
            inducing = saved["inducing"].astype(np.float64) if "inducing" in saved else None
            maps[(label(method), env)] = (saved["lengthscale"].astype(np.float64), inducing)
    if not maps:
        return None
    return plot_lengthscale_grid(truths, maps, path)


# ---------------------------------------------------------------------- experiments
@dataclass
class Report:
    """What a bench command produced: the sweep's outcome and every written file."""

    sweep: SweepResult
    files: dict[str, Path]

    def describe(self) -> str:
        s = self.sweep
        counts = {k: len(s.by_status(k)) for k in ("done", "skipped", "failed")}
        restored = sum(r.restored for r in s.runs)
        lines = [
            f"{len(s.runs)} runs under {s.root}: {counts['done']} run now, {counts['skipped']} already "
            f"finished{f' ({restored} restored from {s.results})' if restored else ''}, {counts['failed']} failed"
        ]
        if s.results is not None:
            lines.append(f"run summaries kept in {s.results}")
        lines += [f"  FAILED {r.run_id}: {r.error} (traceback: {r.run_dir / 'error.txt'})" for r in s.failed]
        lines += [f"{k}: {v}" for k, v in self.files.items()]
        return "\n".join(lines)


def write_report(
    exp: Experiment, out: Path, sweep: SweepResult, curve_keys: Sequence[str] = SUMMARY_KEYS, lengthscales: bool = False
) -> Report:
    """The summary table, curves and figures of ``exp``'s finished missions, written to ``out``."""
    specs = sweep.specs
    records = collect(out, specs)
    files: dict[str, Path] = {}
    if records:
        caption = (
            f"Missions: budget {exp.mission.get('budget')} samples, M = {exp.mission.get('num_inducing')}, "
            f"{exp.mission.get('num_steps')} gradient steps per epoch, kernel {exp.mission.get('kernel')}"
            + ("; the paper's initial noise variance 1.0 and exact M-step" if exp.paper_options else "")
            + "; "
            f"seeds {','.join(map(str, exp.seeds))}. Each run's metrics are averaged over all its evaluations "
            "(pilot survey and every decision epoch); cells show mean ± std over seeds with "
            "<sub>min</sub><sup>max</sup>; the best mean per environment is bold. Code: "
            + "; ".join(sorted({str(r.code) for r in records}))
            + "."
        )
        files.update(write_summary(summarise(records), out, "summary", exp.title, caption))
        final_caption = (
            "Each run's SMSE and MSLL at its last evaluation (after "
            f"{exp.mission.get('budget')} samples); cells show mean ± std over seeds with <sub>min</sub><sup>max</sup>; "
            "the best mean per environment is bold."
        )
        files.update(
            write_summary(
                summarise(records, FINAL_KEYS, final=True),
                out,
                "final",
                f"{exp.title}: final SMSE and MSLL",
                final_caption,
                FINAL_KEYS,
                FINAL_HEADERS,
            )
        )
        files.update(write_paper_comparison(summarise(records), out))
        files["per_run_csv"] = write_per_run(records, out / "runs.csv")
        if any(r.method == "poam" for r in records):
            files.update(write_paired(paired_comparisons(records), out))
        files.update(curve_figures(records, out, curve_keys, exp.name))
        if lengthscales:
            ls = lengthscale_figure(records, specs, out, out / f"{exp.name}-lengthscales.png")
            if ls is not None:
                files["lengthscales"] = ls
    (out / "report.json").write_text(json.dumps({k: str(v) for k, v in files.items()}, indent=1))
    return Report(sweep, files)


def _mission_settings(budget: int, num_inducing: int, num_steps: int, **extra: Any) -> dict:
    return {
        **PAPER_SETTINGS,
        "budget": int(budget),
        "num_inducing": int(num_inducing),
        "num_steps": int(num_steps),
        **extra,
    }


@dataclass(frozen=True)
class PoamOptions:
    """The options of an experiment of Chen et al. 2024: environments, methods and seeds (lists, or text such as
    ``"paper-env2,paper-env3"`` and ``"0-9"``), every mission's ``budget``, M (``num_inducing``), gradient steps per
    epoch and simulator ``profile`` (``reference-code``: the simulator of the paper's implementation, which made the
    paper's numbers); ``paper_options`` pins the paper's model settings (:func:`paper_model_options`); ``mission``
    overrides any other MissionConfig field."""

    #: the experiment's name (its runs' directory in the results tree), title, its command's help, curves and whether
    #: it draws θ
    NAME: ClassVar[str] = ""
    TITLE: ClassVar[str] = ""
    DESCRIPTION: ClassVar[str] = ""
    CURVES: ClassVar[tuple[str, ...]] = SUMMARY_KEYS
    LENGTHSCALES: ClassVar[bool] = False

    envs: str | Sequence[str] = ()
    methods: str | Sequence[str] = ()
    seeds: str | Sequence[int] = option("0-9", "seeds, e.g. 0-9, 0,3,5 or 0-2,7")
    budget: int = option(5000, "samples per mission")
    num_inducing: int = option(500, "inducing points M")
    num_steps: int = option(10, "gradient steps per decision epoch")
    profile: str = option(
        "paper",
        "simulator settings: paper (its text: 3 Hz, 1 rad/s turns, bilinear field) or reference-code (its "
        "implementation, which made its numbers: 2.5 Hz, no turn limit, nearest cell, pilot scaling)",
    )
    paper_options: bool = True
    mission: dict[str, Any] = field(default_factory=dict)

    def overrides(self) -> dict[str, dict]:
        """The experiment's settings (name → mission overrides; a single '' setting adds no directory level)."""
        return {"": {}}

    def experiment(self) -> Experiment:
        """The grid of missions these options choose."""
        return Experiment(
            self.NAME,
            self.TITLE,
            parse_names(self.envs, "environment", ENVIRONMENTS),
            parse_names(self.methods, "method"),
            parse_seeds(self.seeds),
            _mission_settings(
                self.budget, self.num_inducing, self.num_steps, **{"profile": self.profile, **self.mission}
            ),
            self.overrides(),
            self.paper_options,
        )


@dataclass(frozen=True)
class Table1Options(PoamOptions):
    """Table I, Fig. 5 and Fig. 7, on the paper's own terrains by default
    (:data:`~onlinegp.experiments.simulator.fields.PAPER_ENVS`)."""

    NAME = "poam-table1"
    TITLE = "Table I (Chen et al. 2024): benchmarking"
    DESCRIPTION = (
        "Chen et al. 2024, Table I, Fig. 5 and Fig. 7: SSGP++, OVC, OVC++, POAM, FULL with the Attentive Kernel."
    )
    LENGTHSCALES = True

    envs: str | Sequence[str] = option(
        PAPER_ENVS,
        "comma-separated bundled environments (or .npy/.npz/.tif files); default: the paper's own Env2 and Env3",
    )
    methods: str | Sequence[str] = option(TABLE1_METHODS, "comma-separated registered models")


@dataclass(frozen=True)
class AblationOptions(PoamOptions):
    """The ablation study (§V-C, Fig. 8) in Env1 by default."""

    NAME = "poam-ablation"
    TITLE = "Ablation study (Chen et al. 2024, §V-C, Fig. 8)"
    DESCRIPTION = "Ablation study of Chen et al. 2024 (§V-C, Fig. 8): POAM against its variants."

    envs: str | Sequence[str] = option((DEFAULT_ENV,), "comma-separated environments (Chen et al. 2024: Env1 only)")
    methods: str | Sequence[str] = option(ABLATION_METHODS, "comma-separated registered models")


@dataclass(frozen=True)
class RobustnessOptions(PoamOptions):
    """Appendix B (Fig. 9): random initialisation, and random initialisation with the random planner (``settings``,
    keys of :data:`ROBUSTNESS_SETTINGS`)."""

    NAME = "poam-robustness"
    TITLE = "Robustness (Chen et al. 2024, appendix B, Fig. 9)"
    DESCRIPTION = "Chen et al. 2024, appendix B (Fig. 9): random initialisation and random planner, with FULL."
    CURVES = ("smse", "msll")

    envs: str | Sequence[str] = option(SAMPLE_ENVS, "comma-separated environments")
    methods: str | Sequence[str] = option(ROBUSTNESS_METHODS, "comma-separated registered models")
    settings: str | Sequence[str] = option(
        tuple(ROBUSTNESS_SETTINGS), "random-init (max-entropy planner) and/or random-planner"
    )

    def overrides(self) -> dict[str, dict]:
        chosen = parse_names(self.settings, "setting")
        unknown = [s for s in chosen if s not in ROBUSTNESS_SETTINGS]
        if unknown:
            raise ValueError(f"unknown robustness setting(s) {unknown}; choose from {', '.join(ROBUSTNESS_SETTINGS)}")
        return {s: ROBUSTNESS_SETTINGS[s] for s in chosen}


def specs(options: PoamOptions) -> list[RunSpec]:
    """One spec per mission of the options' experiment; every config validated up front."""
    return options.experiment().specs()


def summarise_sweep(out: Path, sweep: SweepResult, options: PoamOptions, quiet: bool, log: Echo) -> Report:
    """:func:`write_report` of the options' experiment."""
    return write_report(options.experiment(), out, sweep, options.CURVES, options.LENGTHSCALES)


def show(report: Report, quiet: bool, echo: Callable[..., Any]) -> int:
    """What ``onlinegp bench poam-*`` prints of ``report`` (the summary table, then the runs and files; to stderr
    when a run failed); exit 1 if any run failed."""
    if not quiet and "summary_md" in report.files:
        echo(report.files["summary_md"].read_text())
    if report.sweep.failed or not quiet:
        echo(report.describe(), err=bool(report.sweep.failed))
    return 1 if report.sweep.failed else 0


#: the ``onlinegp bench`` commands of this module (:mod:`onlinegp.experiments.bench.protocol`)
BENCHES = {
    o.NAME: Bench(o.NAME, o, specs, mission_job, summarise_sweep, SUMMARY_FILES, show=show, description=o.DESCRIPTION)
    for o in (Table1Options, AblationOptions, RobustnessOptions)
}
