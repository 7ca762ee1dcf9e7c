"""Running a mission: the single-vehicle :class:`~onlinegp.experiments.simulator.mission.Mission` or the
:class:`~onlinegp.experiments.simulator.fleet.FleetMission` a config asks for (:func:`make_mission`, resumed by
:func:`open_mission`), run to its budget into a run directory (:func:`run_mission`: config.json, metrics, checkpoints,
the final model, the survey, figures), and what a run directory holds (:func:`run_state`)."""

from __future__ import annotations

import importlib.util
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...base import OnlineGP, model_record
from ...io import atomic_write, write_csv
from ...kernels import native
from ...maps import write_geotiff
from .fields import Field
from .fleet import FleetMission
from .mission import SCHEMA, Mission, MissionConfig, lengthscale_grid
from .phases import PhaseTimer, activated, phase

METRIC_KEYS = ("smse", "msll", "rmse", "nlpd", "mae")
CHECKPOINT = "checkpoint.pt"
SURVEY = "survey.npz"
#: files only a finished mission leaves, in the order they are written after its last epoch (figures come before
#: metrics.json): a mission is finished when all of them are there
FINISHED = ("model.pt", SURVEY, "metrics.json")
#: seconds between checkpoints (each rewrites about 10 MB for POAM at M = 500, and metrics.csv with it): a killed
#: mission loses at most this much work; a stopped or finished one is checkpointed at its last epoch
CHECKPOINT_EVERY_S = 30.0


def write_figures(mission: Mission, out: Path, resolution: int = 100) -> dict[str, Path]:
    """Ground truth, predicted mean, std, absolute error, length-scale map, inducing inputs over the path,
    metric curves (and the animation when the mission recorded frames); colour bars in the field's unit, every
    figure titled with the model and the environment."""
    from .. import plots
    from ..plots import value_label

    fig_dir = out / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    extent = list(mission.config.task_extent)
    grid = mission.field.grid(resolution, tuple(extent))
    shape = (resolution, resolution)
    truth = mission.field(grid).reshape(shape)
    pred = mission.model.predict(torch.from_numpy(grid))
    mean, std = pred.mean.numpy().reshape(shape), pred.var_y.sqrt().numpy().reshape(shape)
    lo, hi = float(truth.min()), float(truth.max())
    unit = mission.field.unit
    heading = f"{mission.config.model} on {mission.field.name} (seed {mission.config.seed})"
    labels = {"suptitle": heading, "label": value_label("elevation", unit)}
    files = {
        "ground_truth": plots.plot_map(
            truth, extent, fig_dir / "ground_truth.png", "ground truth", vmin=lo, vmax=hi, **labels
        ),
        "mean": plots.plot_map(mean, extent, fig_dir / "mean.png", "predicted mean", vmin=lo, vmax=hi, **labels),
        "std": plots.plot_map(
            std,
            extent,
            fig_dir / "std.png",
            "predictive std (with noise)",
            cmap="viridis",
            path_xy=mission.paths(),
            suptitle=heading,
            label=value_label("predictive std", unit),
        ),
        "abs_error": plots.plot_map(
            np.abs(mean - truth),
            extent,
            fig_dir / "abs_error.png",
            "absolute error",
            cmap="magma",
            suptitle=heading,
            label=value_label("absolute error", unit),
        ),
    }
    ls = lengthscale_grid(mission.model, grid)
    if ls is not None:
        files["lengthscale"] = plots.plot_map(
            ls.reshape(shape),
            extent,
            fig_dir / "lengthscale.png",
            "learnt length-scale",
            cmap="plasma",
            suptitle=heading,
            label="length-scale (m)",
        )
    Z = getattr(mission.model, "inducing_inputs", None)
    Z = None if Z is None else np.asarray(Z.detach() if isinstance(Z, torch.Tensor) else Z, dtype=np.float64)
    title = f"path ({mission.num_samples} samples)" + ("" if Z is None else f" and {len(Z)} inducing inputs")
    files["inducing"] = plots.plot_map(
        truth, extent, fig_dir / "inducing.png", title, vmin=lo, vmax=hi, points=Z, path_xy=mission.paths(), **labels
    )
    files["metric_curves"] = plots.plot_metric_curves(mission.rows, fig_dir / "metrics.png", title=heading)
    if mission.frames:
        n = mission.config.eval_grid
        truth_eval = mission.eval_y.reshape(n, n)
        frames = [
            {
                "mean": f["mean"],
                "std": f["std"],
                "path": _joined(mission.paths(f["num_samples"])),
                "title": f"epoch {i}, {f['num_samples']} samples",
            }
            for i, f in enumerate(mission.frames)
        ]
        files["animation"] = plots.animate_maps(
            frames, truth_eval, extent, out / "mission.gif", unit=unit, title=heading
        )
    return files


def _joined(paths: list[np.ndarray]) -> np.ndarray:
    """Paths as one array, a row of NaN between them (a line drawn through it breaks there)."""
    gap = np.full((1, 2), np.nan)
    return np.vstack([part for p in paths for part in (gap, p)][1:])


def make_mission(config: MissionConfig, field: Field | None = None) -> Mission:
    """The mission for ``config``: a :class:`~onlinegp.experiments.simulator.fleet.FleetMission` when it sets any
    fleet option, else the single-vehicle :class:`~onlinegp.experiments.simulator.mission.Mission`."""
    if not config.is_fleet:
        return Mission(config, field)
    return FleetMission(config, field)


@dataclass
class MissionResult:
    rows: list[dict]
    out: Path
    files: dict[str, Path]
    completed: bool

    @property
    def final(self) -> dict:
        return self.rows[-1]


def _progress(quiet: bool):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("epoch {task.fields[epoch]:>4}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("samples  SMSE {task.fields[smse]}  MSLL {task.fields[msll]}"),
        TimeElapsedColumn(),
        disable=quiet,
        transient=False,
    )


def run_state(out: str | Path) -> str | None:
    """What ``out`` holds: ``"finished"`` (all of a completed mission's :data:`FINISHED` files), ``"checkpoint"`` (an
    unfinished mission to resume, or a finished one whose final files were not all written: resuming writes them) or
    None (no mission)."""
    out = Path(out)
    if all((out / name).is_file() for name in FINISHED):
        return "finished"
    if (out / CHECKPOINT).is_file():
        return "checkpoint"
    return "finished" if any((out / name).is_file() for name in FINISHED) else None


def open_mission(config: MissionConfig, out: str | Path, resume: bool = False, field: Field | None = None) -> Mission:
    """Validate ``config`` (field, model, planner, budget) and, with ``resume``, load ``out``'s checkpoint.

    Raises ValueError, before any simulation or model update, for anything wrong.
    """
    with phase("mission_build"):
        mission = make_mission(config, field)
    ckpt = Path(out) / CHECKPOINT
    if resume and ckpt.is_file():
        mission.load(ckpt)
    return mission


def _recorded_config(config: MissionConfig, model: OnlineGP) -> dict:
    """config.json's ``config`` (the settings the mission ran with: ``num_inducing``, ``num_steps`` and ``kernel``
    left to the model's defaults hold the values it chose, and ``model_defaults`` names them) and ``model``
    (:func:`~onlinegp.base.model_record`)."""
    resolved = model_record(model)
    recorded = config.to_dict()
    defaults = [k for k in ("num_inducing", "num_steps", "kernel") if recorded[k] is None]
    chosen = {**resolved["options"], "num_steps": resolved["num_steps"]}  # the steps of the model's training spec
    recorded.update({k: chosen.get(k) for k in defaults})
    return {"config": recorded, "model_defaults": defaults, "model": resolved}


def run_mission(
    mission: Mission | MissionConfig,
    out: str | Path,
    quiet: bool = False,
    stop_after_epochs: int | None = None,
    echo: Callable[[str], None] = print,
    checkpoint_every: float = CHECKPOINT_EVERY_S,
    phases: PhaseTimer | None = None,
) -> MissionResult:
    """Run ``mission`` (fresh from a config, or from :func:`open_mission`, possibly resumed) to its budget,
    writing config.json, metrics.csv/json, checkpoints, the final model and figures to ``out``.

    The checkpoint (and metrics.csv) is written after the first epoch that ends ``checkpoint_every`` seconds or more
    after the last one (0: after every epoch) and after the last epoch of the call. ``stop_after_epochs`` stops
    after that many epochs of this call, leaving the resumable checkpoint that a killed run leaves behind.
    ``phases`` (None: the active one, if any) times the run's phases
    (:mod:`~onlinegp.experiments.simulator.phases`).
    """
    with activated(phases), phase("run"):
        return _run_mission(mission, out, quiet, stop_after_epochs, echo, checkpoint_every)


def _run_mission(
    mission: Mission | MissionConfig,
    out: str | Path,
    quiet: bool,
    stop_after_epochs: int | None,
    echo: Callable[[str], None],
    checkpoint_every: float,
) -> MissionResult:
    """:func:`run_mission` (its phases reported into the active timer)."""
    mission = make_mission(mission) if isinstance(mission, MissionConfig) else mission
    config = mission.config
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ckpt = out / CHECKPOINT
    if mission.rows and not quiet:
        echo(f"resuming {out} after epoch {mission.epoch} ({mission.num_samples} samples)")
    elif ckpt.is_file() and not quiet:
        echo(f"{out} holds an earlier mission: starting afresh over it (--resume continues one instead)")
    if not mission.rows:  # a fresh start: no output of an earlier mission may stay to be mistaken for this one's
        for name in (*FINISHED, "mission.gif"):
            (out / name).unlink(missing_ok=True)
    info = {
        "schema": SCHEMA,  # of ``config`` (MissionConfig.from_record reads it)
        **_recorded_config(config, mission.model),
        "model_class": type(mission.model).__name__,
        "field": {
            "name": mission.field.name,
            "description": mission.field.description,
            "digest": mission.field.digest(),
            "extent": list(mission.field.extent),
            "shape": list(mission.field.values.shape),
            "unit": mission.field.unit,
        },
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "numerics": native.numerics(),
        **mission.provenance(),
    }
    atomic_write(out / "config.json", json.dumps(info, indent=2))
    ran = 0
    with _progress(quiet) as progress:
        fmt = lambda r: {"epoch": r["epoch"], "smse": f"{r['smse']:.4f}", "msll": f"{r['msll']:+.3f}"}  # noqa: E731
        task = progress.add_task(
            "mission",
            total=config.budget,
            completed=mission.num_samples,
            **(fmt(mission.rows[-1]) if mission.rows else {"epoch": "-", "smse": "-", "msll": "-"}),
        )
        saved = time.perf_counter()
        while not mission.done and (stop_after_epochs is None or ran < stop_after_epochs):
            with phase("epochs"):
                row = mission.step()
            ran += 1
            if mission.epoch == 0:  # the model's size and kernel are known once it has seen the pilot survey
                info.update(_recorded_config(config, mission.model))
                atomic_write(out / "config.json", json.dumps(info, indent=2))
            last = mission.done or ran == stop_after_epochs
            if last or time.perf_counter() - saved >= checkpoint_every:
                with phase("checkpoints"):
                    mission.save(ckpt)
                    write_csv(out / "metrics.csv", mission.rows)
                saved = time.perf_counter()
            progress.update(task, completed=mission.num_samples, **fmt(row))
    if not mission.done:
        return MissionResult(mission.rows, out, {"checkpoint": ckpt}, completed=False)
    return MissionResult(mission.rows, out, _write_outputs(mission, out, ckpt), completed=True)


def _write_outputs(mission: Mission, out: Path, ckpt: Path) -> dict[str, Path]:
    """A finished mission's files: the final model, metrics.csv, the survey, the figures, the map (with the geotiff
    extra) and metrics.json (the last)."""
    with phase("outputs"):
        mission.model.save(str(out / "model.pt"))
    with phase("checkpoints"):
        write_csv(out / "metrics.csv", mission.rows)
    with phase("outputs"):
        atomic_write(out / SURVEY, lambda fh: mission.survey().save(fh))
    with phase("figures"):
        files = write_figures(mission, out)
    with phase("outputs"):
        _write_map_and_metrics(mission, out, files)
    files.update(
        {
            "config": out / "config.json",
            "metrics_csv": out / "metrics.csv",
            "metrics_json": out / "metrics.json",
            "model": out / "model.pt",
            "checkpoint": ckpt,
            "survey": out / SURVEY,
        }
    )
    return files


def _write_map_and_metrics(mission: Mission, out: Path, files: dict[str, Path]) -> None:
    """The GIS map (with the geotiff extra, into ``files``) and metrics.json, the file that marks a finished run."""
    if importlib.util.find_spec("rasterio") is not None:  # the geotiff extra
        xmin, xmax, ymin, ymax = mission.config.resolved_extent()
        cell = max(xmax - xmin, ymax - ymin) / 100
        files["map"] = write_geotiff(out / "map.tif", mission.model, (xmin, ymin), (xmax, ymax), cell_size=cell)
    final = {k: mission.rows[-1][k] for k in ("epoch", "num_samples", "num_inducing", *METRIC_KEYS)}
    summary = {
        "final": final,
        "mean_over_epochs": {k: float(np.mean([r[k] for r in mission.rows])) for k in METRIC_KEYS},
        "total_update_time": float(sum(r["update_time"] for r in mission.rows)),
        "wall_time": mission.wall_time,
        "epochs": len(mission.rows),
    }
    atomic_write(out / "metrics.json", json.dumps({"summary": summary, "rows": mission.rows}, indent=1))  # the last


def describe(result: MissionResult) -> str:
    """Where the outputs are and the final metrics, for the command line."""
    f = result.final
    lines = [
        f"mission finished: {f['num_samples']} samples in {f['epoch'] + 1} epochs "
        f"({result.rows[-1]['wall_time']:.1f} s of simulation, model updates and evaluation)",
        "final "
        + "  ".join(f"{k.upper()} {f[k]:.4g}" for k in METRIC_KEYS)
        + (f"  inducing {f['num_inducing']}" if f["num_inducing"] is not None else ""),
        f"run directory: {result.out}  (config.json, metrics.csv, metrics.json, model.pt, checkpoint.pt, "
        f"{SURVEY}: replay it with `onlinegp replay`)",
        f"figures: {result.out / 'figures'}"
        + ("  map.tif: mean and field std over the task extent, for GIS" if "map" in result.files else ""),
    ]
    if "animation" in result.files:
        lines.append(f"animation: {result.files['animation']}")
    return "\n".join(lines)
