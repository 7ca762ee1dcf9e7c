"""Replay of recorded surveys: feed a logged stream through one or more models, batch by batch as recorded.

A survey log holds sample locations ``x`` (N, D), measurements ``y`` (N,), the batch boundaries ``batch_end``
(cumulative sample counts after each update; the first entry ends the pilot survey) and, for evaluation, a ground
truth ``eval_x``, ``eval_y``. It is a ``.npz`` (the format of a mission's ``survey.npz`` and of the streams the POAM
paper's implementation recorded; recorded ``smse``, ``msll`` and ``update_s`` per update are read when present) or a
CSV read by :func:`onlinegp.tables.read_table` (header optional; input columns, a target and either a ``batch``
column, the batch index of each row, or a ``time`` column in seconds cut into batches of ``period`` seconds), or a
vehicle's own log, read by :mod:`onlinegp.vehicle_logs` (an ArduPilot DataFlash ``.bin``, a ROS 1 ``.bag``, a ROS 2
bag: its values at its positions, in metres, cut into batches of ``period`` seconds as a CSV with ``--lonlat`` and
``--time``). A CSV or a vehicle log has no ground truth of its own: pass one (``eval_path``, an ``.npz`` with
``eval_x`` and ``eval_y``) or hold out a random fraction of the samples.

Each model sees identical data; after every update it is evaluated on the same points (SMSE, MSLL against
N(mean, std) of all samples so far, RMSE, NLPD, MAE) and timed, so models compare like for like.
"""

from __future__ import annotations

import inspect
import json
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import metrics, vehicle_logs
from ..base import FIRST_BATCH, OnlineGP, model_record
from ..io import atomic_write, write_csv
from ..kernels import native
from ..maps import write_geotiff
from ..models.registry import make_recorded_model
from ..tables import Table, read_table
from . import plots

RECORDED = ("smse", "msll", "update_s")
#: ``columns`` of a vehicle log (:func:`onlinegp.vehicle_logs.read_log`), each with its option; the others are a CSV's
LOG_COLUMNS = {
    "value": "--value",
    "position": "--position",
    "value_topic": "--value-topic",
    "position_topic": "--position-topic",
}


@dataclass
class Survey:
    """A recorded stream and the points it is evaluated on; ``recorded`` holds per-update metrics of the recorder."""

    x: np.ndarray
    y: np.ndarray
    batch_end: np.ndarray
    eval_x: np.ndarray
    eval_y: np.ndarray
    recorded: dict[str, np.ndarray] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = self.x.shape[0]
        if self.x.ndim != 2 or self.y.shape != (n,):
            raise ValueError(
                f"a survey needs x of shape (N, D) and y of shape (N,), got {self.x.shape} and {self.y.shape}"
            )
        ends = self.batch_end
        if ends.ndim != 1 or len(ends) == 0 or ends[0] < 1 or (np.diff(ends) <= 0).any() or ends[-1] > n:
            raise ValueError(
                "batch_end must be increasing sample counts between 1 and the number of samples "
                f"({n}); got {ends[:5]}{'...' if len(ends) > 5 else ''}"
            )
        if self.eval_x.ndim != 2 or self.eval_x.shape[1] != self.x.shape[1] or self.eval_y.shape != (len(self.eval_x),):
            raise ValueError(
                f"eval_x must be (P, {self.x.shape[1]}) and eval_y (P,), got {self.eval_x.shape} and "
                f"{self.eval_y.shape}"
            )
        if not (np.isfinite(self.x).all() and np.isfinite(self.y).all()):
            raise ValueError("the survey's x or y holds NaN or inf; drop those rows first")

    @property
    def batches(self) -> list[slice]:
        starts = np.concatenate([[0], self.batch_end[:-1]])
        return [slice(int(a), int(b)) for a, b in zip(starts, self.batch_end)]

    def save(self, path: str | Path) -> None:
        """Write the survey as ``.npz`` (readable by :func:`load_survey` and ``onlinegp replay``)."""
        np.savez_compressed(
            path,
            x=self.x,
            y=self.y,
            batch_end=self.batch_end,
            eval_x=self.eval_x,
            eval_y=self.eval_y,
            meta=json.dumps(self.meta),
            **self.recorded,
        )


def load_survey(
    path: str | Path,
    eval_path: str | Path | None = None,
    period: float | None = None,
    holdout: float = 0.0,
    seed: int = 0,
    columns: dict | None = None,
) -> Survey:
    """Read a survey log (``.npz``, ``.csv`` or a vehicle log, see the module docstring); ``columns`` (``target``,
    ``inputs``, ``batch``, ``time``, ``dropna``, ...: :func:`onlinegp.tables.read_table`'s) choose a CSV's roles, and
    ``value``, ``position``, ``value_topic``, ``position_topic`` (:func:`onlinegp.vehicle_logs.read_log`'s) a vehicle
    log's; they are named in ``meta["roles"]``. A CSV's or vehicle log's ``meta["x_bounds"]`` is its whole input box
    (the models' input scaling, as a log's range is known up front); an ``.npz`` keeps what its recorder used (its
    ``x_bounds``, else the scaling fitted on the first batch and frozen)."""
    if not 0 <= holdout < 1:
        raise ValueError(f"--holdout is the fraction of samples held out, 0 <= h < 1; got {holdout}")
    if period is not None and not period > 0:
        raise ValueError(f"--period is the decision period in seconds and must be positive; got {period}")
    path = Path(path)
    kind = vehicle_logs.log_kind(path)
    if kind is None and not path.is_file():
        hint = " (a ROS 2 bag's directory holds metadata.yaml: pass its .db3 or .mcap file)" if path.is_dir() else ""
        raise ValueError(f"no survey log at {str(path)!r}{hint}")
    if path.suffix == ".npz":
        arrays = _read_npz(path, "survey log")
        missing = [k for k in ("x", "y", "batch_end") if k not in arrays]
        if missing:
            raise ValueError(
                f"{path.name} lacks {', '.join(missing)}: a survey .npz holds x, y, batch_end (and eval_x, eval_y)"
            )
        x, y, ends = arrays["x"].astype(np.float64), arrays["y"].astype(np.float64), arrays["batch_end"].astype(int)
        recorded = {k: arrays[k].astype(np.float64) for k in RECORDED if k in arrays}
        meta = {"x_bounds": FIRST_BATCH} | (json.loads(str(arrays["meta"])) if "meta" in arrays else {})
        truth = (arrays["eval_x"], arrays["eval_y"]) if "eval_x" in arrays else None
    elif path.suffix == ".csv" or kind is not None:
        x, y, ends, roles, frame = _read_csv(path, period, _table(path, kind, columns or {}))
        recorded, truth = {}, None
        meta = {"roles": roles, "x_bounds": [x.min(0).tolist(), x.max(0).tolist()]}
        if frame is not None:
            meta["frame"] = frame
    else:
        raise ValueError(
            f"survey logs are .npz or .csv files or vehicle logs (.bin, .bag, a ROS 2 bag), got {path.name!r}"
        )
    if eval_path is not None:
        truth = _truth(Path(eval_path), meta.get("frame"), columns or {})
    if truth is None and holdout > 0:
        x, y, ends, truth = _hold_out(x, y, ends, holdout, seed)
    if truth is None:
        raise ValueError(
            f"{path.name} has no ground truth: pass an .npz with eval_x and eval_y, or hold out a "
            "fraction of the samples (holdout=0.1)"
        )
    return Survey(x, y, ends, np.asarray(truth[0], np.float64), np.asarray(truth[1], np.float64), recorded, meta)


def _truth(path: Path, frame: dict | None, columns: dict) -> tuple[np.ndarray, np.ndarray]:
    """The ground truth at ``path``: an ``.npz`` with eval_x and eval_y, or a second log (a held-back survey) read
    with the survey's column options, its positions in the survey's local ``frame``."""
    if path.suffix == ".npz":
        arrays = _read_npz(path, "ground truth")
        if not {"eval_x", "eval_y"} <= set(arrays):
            raise ValueError(f"the ground truth {path.name} must hold eval_x and eval_y")
        return arrays["eval_x"], arrays["eval_y"]
    table = _table(path, vehicle_logs.log_kind(path), columns)
    if frame is None:
        return table.x, table.y
    if table.frame["crs"] != frame["crs"]:
        raise ValueError(
            f"the ground truth {path.name} lies in {table.frame['crs']}, the survey in {frame['crs']} (another UTM "
            "zone): evaluate on a survey of the same area"
        )
    return table.x + np.subtract(table.frame["origin"], frame["origin"]), table.y


def _read_npz(path: Path, what: str) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` at ``path``; a ValueError naming the file when it is missing, empty, truncated or
    not an ``.npz`` (whatever numpy and zipfile raise for it)."""
    if not path.is_file():
        raise ValueError(f"no {what} at {str(path)!r}")
    if path.stat().st_size == 0:
        raise ValueError(f"the {what} {str(path)!r} is empty (0 bytes): was it written to the end?")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except Exception as err:  # BadZipFile, EOFError, zlib.error, ValueError, OSError ...
        raise ValueError(
            f"cannot read the {what} {str(path)!r} ({type(err).__name__}: {err}): it is truncated or not an .npz "
            "written by numpy (np.savez)"
        ) from err


def _table(path: Path, kind: str | None, columns: dict) -> Table:
    """The table of a CSV (``kind`` None) or of a vehicle log of that kind; an option of the other is an error."""
    defaults = inspect.signature(read_table).parameters
    unknown = sorted(k for k in columns if k == "path" or (k not in LOG_COLUMNS and k not in defaults))
    if unknown:
        raise ValueError(
            f"no column option {', '.join(unknown)}: a CSV's are {', '.join(list(defaults)[1:])}; a vehicle log's "
            f"{', '.join(LOG_COLUMNS)}"
        )
    log = {k: v for k, v in columns.items() if k in LOG_COLUMNS and v is not None}
    csv = {k: v for k, v in columns.items() if k not in LOG_COLUMNS}
    if kind is None:
        if log:
            flags = ", ".join(LOG_COLUMNS[k] for k in log)
            raise ValueError(
                f"{flags}: a vehicle log's (.bin, .bag, ROS 2 bag); {path.name} is a CSV: name its columns"
            )
        return read_table(path, **csv)
    given = [k for k, v in csv.items() if k != "dropna" and v != defaults[k].default]
    if given:
        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        raise ValueError(
            f"{flags}: a CSV's columns; {path.name} is a vehicle log ({kind}): name its value and position with "
            + ("--value MSG.Field and --position MSG" if kind == "dataflash" else "--value-topic and --position-topic")
        )
    return vehicle_logs.read_log(path, **log).table(csv.get("dropna", False), path.name)


def _read_csv(path: Path, period: float | None, table: Table) -> tuple:
    """x, y, batch ends, the roles line and the longitude/latitude frame (or None) of a CSV log's ``table``."""
    if table.key is None:
        raise ValueError(
            f"{path.name}: a replayed CSV needs a 'batch' column (batch of each row) or a 'time' column (seconds): "
            "name it in the header, or pass --batch COL or --time COL"
        )
    if table.key_role == "batch":
        key = table.key
    else:
        if period is None:
            raise ValueError(f"{path.name} has timestamps but no batches: give the decision period (--period SECONDS)")
        key = np.floor((table.key - table.key[0]) / period)
    if (np.diff(key) < 0).any():
        raise ValueError(f"{path.name}: rows must be in the order collected (batch/time never decreasing)")
    ends = np.append(np.flatnonzero(np.diff(key)) + 1, len(key)).astype(int)
    sizes = np.diff(ends, prepend=0)
    if table.key_role == "time" and len(sizes) > 10 and (sizes == 1).mean() > 0.5:
        warnings.warn(
            f"{path.name}: {(sizes == 1).sum()} of {len(sizes)} batches of {period:g} s hold a single sample, one "
            "update each: is --period in the time column's unit? Say the column's unit (--time-unit ms) or give a "
            "longer --period",
            stacklevel=3,
        )
    roles = table.roles() + (f" (batches of {period:g} s)" if table.key_role == "time" else "")
    return table.x, table.y, ends, roles, table.frame


def _hold_out(
    x: np.ndarray, y: np.ndarray, ends: np.ndarray, fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Move a random ``fraction`` of the samples out of the stream into the evaluation set."""
    test = np.random.default_rng(seed).random(len(y)) < fraction
    kept_before = np.concatenate([[0], np.cumsum(~test)])
    new_ends = np.unique(kept_before[ends])
    return x[~test], y[~test], new_ends[new_ends > 0], (x[test], y[test])


def replay(survey: Survey, model: OnlineGP, on_row: Callable[[dict], None] | None = None) -> list[dict]:
    """Feed the survey through ``model`` batch by batch; one metrics row per update."""
    rows = []
    for epoch, batch in enumerate(survey.batches):
        xb, yb = torch.from_numpy(survey.x[batch]), torch.from_numpy(survey.y[batch])
        t0, c0 = time.perf_counter(), time.process_time()
        report = model.update(xb, yb)
        t_update, c_update = time.perf_counter() - t0, time.process_time() - c0
        pred = model.predict(torch.from_numpy(survey.eval_x))
        seen = survey.y[: batch.stop]
        m = metrics.all_metrics(
            survey.eval_y, pred.mean.numpy(), pred.var_y.numpy(), float(seen.mean()), float(seen.std())
        )
        row = {
            "epoch": epoch,
            "num_samples": batch.stop,
            "num_inducing": report.num_inducing,
            **m,
            "update_time": t_update,
            "update_cpu_time": c_update,
            **model.hyperparameters(survey.eval_x),
        }
        for key in RECORDED:
            if key in survey.recorded:
                row[f"recorded_{key}"] = float(survey.recorded[key][epoch])
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows


def build_replay_model(name: str, survey: Survey, seed: int, options: dict) -> OnlineGP:
    """The model a replay runs: the survey's input box (when it records one) and a seeded initialisation."""
    kwargs = dict(options)
    if "x_bounds" in survey.meta and "x_bounds" not in kwargs:
        kwargs["x_bounds"] = survey.meta["x_bounds"]
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return make_recorded_model(name, survey.x.shape[1], seed=seed, **kwargs)  # built here, under the seed


def summary(rows: list[dict]) -> dict:
    """Final and mission-averaged SMSE/MSLL and the median update time of one replay."""
    smse, msll = np.array([r["smse"] for r in rows]), np.array([r["msll"] for r in rows])
    return {
        "final_smse": float(smse[-1]),
        "final_msll": float(msll[-1]),
        "mean_smse": float(smse.mean()),
        "mean_msll": float(msll.mean()),
        "median_update_s": float(np.median([r["update_time"] for r in rows])),
    }


def comparison_table(results: dict[str, list[dict]], survey: Survey) -> str:
    """A Markdown table of each model's summary, with the recorder's own figures when the log holds them."""
    lines = [
        "| model | final SMSE | final MSLL | averaged SMSE | averaged MSLL | median update (s) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    rows = {name: summary(r) for name, r in results.items()}
    if {"smse", "msll"} <= set(survey.recorded):
        rec = survey.recorded
        rows["recorded"] = {
            "final_smse": rec["smse"][-1],
            "final_msll": rec["msll"][-1],
            "mean_smse": rec["smse"].mean(),
            "mean_msll": rec["msll"].mean(),
            "median_update_s": float(np.median(rec["update_s"])) if "update_s" in rec else np.nan,
        }
    for name, s in rows.items():
        lines.append(
            f"| {name} | {s['final_smse']:.4f} | {s['final_msll']:.3f} | {s['mean_smse']:.4f} | "
            f"{s['mean_msll']:.3f} | {s['median_update_s']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def run_replay(
    log: str | Path,
    model_names: list[str],
    out: str | Path,
    options: dict | None = None,
    seed: int | None = None,
    eval_path: str | Path | None = None,
    period: float | None = None,
    holdout: float = 0.0,
    on_row: Callable[[str, dict], None] | None = None,
    columns: dict | None = None,
    survey: Survey | None = None,
    geotiff: bool = False,
) -> dict[str, list[dict]]:
    """Replay ``log`` through each named model (the recorded model and options when ``model_names`` is empty) and
    write ``<model>/metrics.csv``, ``<model>/config.json`` (the options it ran with:
    :func:`~onlinegp.base.model_record`), ``comparison.md``, ``summary.json`` and ``replay.png`` to ``out``.
    ``columns`` go to :func:`load_survey`; ``survey``, when given, is ``log`` as already loaded. ``geotiff`` also
    writes each model's final map, ``<model>/map.tif`` (:func:`onlinegp.maps.write_geotiff` over the samples' box,
    in the log's longitude/latitude frame when it has one)."""
    survey = survey or load_survey(log, eval_path, period, holdout, seed or 0, columns)
    if geotiff and survey.x.shape[1] != 2:
        raise ValueError(f"--geotiff maps two inputs (east, north); {Path(log).name} has {survey.x.shape[1]}")
    if not model_names:
        if "model" not in survey.meta:
            raise ValueError(f"{Path(log).name} does not record its model: name the model(s) to replay")
        model_names, options = [survey.meta["model"]], {**survey.meta.get("model_options", {}), **(options or {})}
    seed = int(survey.meta.get("seed", 0) if seed is None else seed)
    out = Path(out)
    results = {}
    for name in model_names:
        model = build_replay_model(name, survey, seed, options or {})
        results[name] = replay(survey, model, None if on_row is None else (lambda row, n=name: on_row(n, row)))
        (out / name).mkdir(parents=True, exist_ok=True)
        write_csv(out / name / "metrics.csv", results[name])
        record = {**model_record(model), "numerics": native.numerics()}
        if "frame" in survey.meta:
            record["frame"] = survey.meta["frame"]  # where the inputs' metres lie on the Earth
        atomic_write(out / name / "config.json", json.dumps(record, indent=1))
        if geotiff:
            write_geotiff(
                out / name / "map.tif", model, survey.x.min(0), survey.x.max(0), frame=survey.meta.get("frame")
            )
    table = comparison_table(results, survey)
    atomic_write(
        out / "comparison.md",
        f"Replay of `{Path(log).name}` ({len(survey.y)} samples, "
        f"{len(survey.batch_end)} updates, seed {seed})\n\n{table}",
    )
    atomic_write(out / "summary.json", json.dumps({n: summary(r) for n, r in results.items()}, indent=1))
    curves = [{"survey": Path(log).stem, "model": n, **r} for n, rows in results.items() for r in rows]
    if {"smse", "msll"} <= set(survey.recorded):
        curves += [
            {"survey": Path(log).stem, "model": "recorded", "num_samples": int(e), "smse": float(s), "msll": float(m)}
            for e, s, m in zip(survey.batch_end, survey.recorded["smse"], survey.recorded["msll"])
        ]
    plots.plot_panel_curves(
        curves,
        out / "replay.png",
        ("smse", "msll"),
        x_key="num_samples",
        panel_key="survey",
        title=f"replay of {Path(log).name}",
    )
    return results
