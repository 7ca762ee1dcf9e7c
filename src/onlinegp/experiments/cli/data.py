"""``onlinegp replay`` and ``onlinegp stream``: recorded surveys and datasets through online models."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import typer

from ...base import FIRST_BATCH
from ...io import fresh_directory, run_kind
from . import Options, _claim, _slug, _taking, app, blame_options, parse_model_options

TARGET_HELP = "CSV target column, a header name or 0-based index (default: the last column but batch/time)"
INPUTS_HELP = "comma-separated CSV input columns, names or 0-based indices (default: all but target, batch, time)"


TRUTH_HELP = (
    ".npz with eval_x, eval_y to evaluate on, or a held-back survey in the log's format (read with the same column "
    "options, projected to the same frame)"
)
X_BOUNDS_HELP = (
    "the models' input box as XMIN,XMAX,YMIN,YMAX,... (default: a CSV's or vehicle log's whole range, an .npz's "
    "recorded one), first-batch to fit it on the first batch and freeze it, or widen to fit it on the first batch and "
    "widen it as the vehicle's samples leave it (the models that cannot refuse a batch far outside)"
)
#: ``replay``'s options for a vehicle's log: how its CSV says time and position (taken by
#: :func:`~onlinegp.tables.read_table` by the same names), which of a DataFlash log's messages or a bag's topics are
#: the value and the position (:func:`~onlinegp.vehicle_logs.read_log`'s names), and the map it gives back
FIELD_LOG: Options = {
    "geotiff": (
        bool,
        typer.Option(
            False,
            "--geotiff",
            help="also write each model's final map as map.tif: mean and field std bands over the log's box, in the "
            "--lonlat frame's CRS (needs rasterio)",
        ),
    ),
    "time_unit": (
        str,
        typer.Option(
            "s", "--time-unit", help="unit of the time column: s, ms, us or ns (ISO 8601 times are read as such)"
        ),
    ),
    "lonlat": (
        str,
        typer.Option(
            None,
            "--lonlat",
            help="LON,LAT: the inputs are these columns' longitude and latitude in degrees, projected to metres east "
            "and north of the first position (UTM, pyproj; the frame is recorded in each model's config.json)",
        ),
    ),
    "coord_scale": (
        float,
        typer.Option(
            1.0,
            "--coord-scale",
            help="with --lonlat: degrees per unit of those columns (1e-7 for ArduPilot's integers)",
        ),
    ),
    "value": (
        str,
        typer.Option(
            None, "--value", help="DataFlash .bin: the value mapped, MSG.Field (DPTH.Depth, RFND.Dist, RFND[0].Dist)"
        ),
    ),
    "position": (
        str,
        typer.Option(
            None,
            "--position",
            help="DataFlash .bin: the message whose Lat/Lng are the positions (default GPS; POS, GPS[1], ...); "
            "interpolated in time to each value's TimeUS",
        ),
    ),
    "value_topic": (
        str,
        typer.Option(
            None,
            "--value-topic",
            help="ROS bag: the topic of the value mapped (sensor_msgs/Range, Temperature, FluidPressure, "
            "std_msgs/Float32, Float64)",
        ),
    ),
    "position_topic": (
        str,
        typer.Option(
            None,
            "--position-topic",
            help="ROS bag: the topic of the positions (sensor_msgs/NavSatFix, projected to UTM metres; nav_msgs/Odometry "
            "or geometry_msgs/PoseStamped, metres in its frame), interpolated in time to each value",
        ),
    ),
}


#: how a CSV says time and position, for ``stream`` as for ``replay``
CSV_CLOCK_AND_PLACE: Options = {k: FIELD_LOG[k] for k in ("time_unit", "lonlat", "coord_scale")}


@app.command("replay")
@_taking(FIELD_LOG)
def replay_command(
    log: str = typer.Argument(
        ...,
        help="survey log: .npz (x, y, batch_end, eval_x, eval_y; a mission's survey.npz, "
        "or a stream recorded by the POAM paper's code), .csv (inputs, y, batch or time), or a vehicle's log: "
        "ArduPilot DataFlash .bin (--value), ROS 1 .bag or ROS 2 bag directory, .db3 or .mcap (--value-topic)",
    ),
    model: list[str] = typer.Option(
        None, "--model", help="registered model, repeatable (default: the model the log recorded, with its options)"
    ),
    out: str = typer.Option(
        None, "--out", help="output directory (default: a new runs/replay/LOG[-N], never an existing one)"
    ),
    option: list[str] = typer.Option(
        None, "--option", "-o", help="model constructor argument KEY=VALUE for every model, repeatable"
    ),
    seed: int = typer.Option(None, "--seed", help="model seed (default: the log's, else 0)"),
    truth: str = typer.Option(None, "--truth", help=TRUTH_HELP),
    period: float = typer.Option(None, "--period", help="decision period in seconds (timed CSV logs, vehicle logs)"),
    holdout: float = typer.Option(
        0.0, "--holdout", help="fraction of samples held out for evaluation when the log has no ground truth"
    ),
    target: str = typer.Option(None, "--target", help=TARGET_HELP),
    inputs: str = typer.Option(None, "--inputs", help=INPUTS_HELP),
    batch: str = typer.Option(None, "--batch", help="CSV column of each row's batch index (default: a 'batch' column)"),
    time: str = typer.Option(None, "--time", help="CSV column of times, with --period (default: 'time')"),
    dropna: bool = typer.Option(False, "--dropna", help="drop CSV rows with missing values (default: an error)"),
    x_bounds: str = typer.Option(None, "--x-bounds", help=X_BOUNDS_HELP),
    force: bool = typer.Option(False, "--force", help="replace an --out that holds another run"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress output"),
    **field: Any,
) -> None:
    """Feed a recorded survey through one or more models, batch by batch as recorded, and compare their maps."""
    from ..replay import run_replay

    geotiff = field.pop("geotiff")
    columns = dict(target=target, inputs=_columns(inputs), batch=batch, time=time, dropna=dropna, **field)
    columns["lonlat"] = _columns(field["lonlat"])
    survey, options = _open_survey(log, option, x_bounds, (truth, period, holdout, seed or 0, columns))
    _check_out(out, "replay", force)
    names = list(model or []) or ([survey.meta["model"]] if "model" in survey.meta else [])
    _check_models(names, survey.x.shape[1], option, options, log, survey.meta)
    # a mission's log is its survey.npz: name the replay after the mission's directory
    stem = Path(log).stem if Path(log).stem != "survey" else Path(log).resolve().parent.name
    out = _output_directory(out, "replay", stem, force)
    show = functools.partial(_show_replay_row, quiet)
    try:
        run_replay(
            log, list(model or []), out, options, seed, truth, period, holdout, show, survey=survey, geotiff=geotiff
        )
    except (ValueError, TypeError) as err:
        raise typer.BadParameter(str(err)) from err
    if not quiet:
        typer.echo(open(f"{out}/comparison.md").read())
        typer.echo(f"per-model metrics.csv, comparison.md, summary.json and replay.png in {out}")


def _open_survey(log: str, items: list[str] | None, x_bounds: str | None, how: tuple):
    """``replay``'s survey (:func:`~onlinegp.experiments.replay.load_survey` of *log* and *how*) and the models'
    options (``--option`` *items*, ``--x-bounds``); a log, bound or option refused is a usage error."""
    from ..replay import load_survey

    options = parse_model_options(items)
    if x_bounds is not None:
        options["x_bounds"] = _parse_bounds(x_bounds)
    try:
        survey = load_survey(log, *how)
        bounds = options.get("x_bounds")
        if isinstance(bounds, list) and len(bounds[0]) != survey.x.shape[1]:
            raise ValueError(f"--x-bounds gives {len(bounds[0])} inputs, the log has {survey.x.shape[1]}")
    except (ValueError, TypeError) as err:
        raise typer.BadParameter(str(err)) from err
    return survey, options


def _show_replay_row(quiet: bool, name: str, row: dict) -> None:
    """``replay``'s progress: one line per model update."""
    if not quiet:
        typer.echo(
            f"{name:10s} update {row['epoch']:4d}  samples {row['num_samples']:6d}  "
            f"SMSE {row['smse']:.4f}  MSLL {row['msll']:+.3f}  {row['update_time']:.2f} s"
        )


def _check_models(names: list[str], input_dim: int, items: list[str] | None, options: dict, source: str, meta: dict):
    """Before a ``replay`` or ``stream`` runs: build each model of *names* once (:func:`check_model_options`), then say
    which column of *source* is which (always, before any result) when its loader recorded the roles in *meta*."""
    for name in names:
        check_model_options(name, input_dim, items, options)
    if "roles" in meta:
        typer.echo(f"{Path(source).name}: {meta['roles']}")


def _check_out(out: str | None, kind: str, force: bool) -> None:
    """A usage error, naming ``--force``, when ``--out`` holds another run than a *kind* run and not *force*."""
    if out is not None and run_kind(out) is not None and not force:
        _claim(out, kind)  # raises: names --force


def _output_directory(out: str | None, kind: str, name: str, force: bool) -> str:
    """Claim ``--out`` for a *kind* run, or a new ``runs/KIND/NAME[-N]`` (echoed) when none is given."""
    if out is None:
        out = str(fresh_directory(f"runs/{kind}", name))
        typer.echo(f"output directory: {out}")
    _claim(out, kind, force=force)
    return out


def _columns(text: str | None) -> list[str] | None:
    """``--inputs a,b`` as ``["a", "b"]``."""
    return None if text is None else [c.strip() for c in text.split(",") if c.strip()]


def _parse_bounds(text: str) -> list[list[float]] | str | None:
    """``--x-bounds XMIN,XMAX,YMIN,YMAX,...`` as [[mins], [maxs]]; ``first-batch`` as itself, ``widen`` as None (the
    models' ``x_bounds``)."""
    if text in (FIRST_BATCH, "widen"):
        return None if text == "widen" else FIRST_BATCH
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or len(values) % 2 or any(lo >= hi for lo, hi in zip(values[::2], values[1::2])):
        raise typer.BadParameter(
            f"--x-bounds expects XMIN,XMAX,YMIN,YMAX,... (a min below a max for each input), first-batch or widen; "
            f"got {text!r}"
        )
    return [values[::2], values[1::2]]


def check_model_options(name: str, input_dim: int, items: list[str] | None, options: dict) -> None:
    """Build model ``name`` with ``options`` once, before a run: a usage error naming each ``--option`` item it
    refuses (:func:`~onlinegp.experiments.cli.blame_options`)."""
    from ...models.registry import make_recorded_model  # the options warned when parsed

    problem = blame_options(lambda o: make_recorded_model(name, input_dim, **o), items or [], options)
    if problem is not None:
        raise typer.BadParameter(problem)


@app.command("stream")
@_taking(CSV_CLOCK_AND_PLACE)
def stream_command(
    dataset: str = typer.Option(
        ...,
        "--dataset",
        help="bundled dataset (concrete, bike, magnetic, synthetic1, ...) or a CSV path (last column the target)",
    ),
    model: str = typer.Option("vips", "--model", help="registered model (onlinegp models)"),
    batches: int = typer.Option(None, "--batches", help="number of batches (default: the dataset's, 20 or 50)"),
    order: str = typer.Option(None, "--order", help="sorted (by the first input), random, time or given"),
    seed: int = typer.Option(0, "--seed", help="seed of the 80/20 split, the random order and the model"),
    max_size: int = typer.Option(None, "--max-size", help="subsample the dataset to at most this many rows first"),
    test_fraction: float = typer.Option(0.2, "--test-fraction", help="held-out fraction"),
    scaling: str = typer.Option("standard", "--scaling", help="standard (as Pescador-Barrios et al. 2024) or minmax"),
    split: str = typer.Option("random", "--split", help="random (80/20), or chunked: the VIPS authors' code's folds"),
    option: list[str] = typer.Option(
        [],
        "--option",
        "-o",
        help="model option KEY=VALUE (VALUE a Python literal "
        "or JSON, else a string), e.g. -o delta=0.1 -o 'kernel_options={\"ard\": false}'",
    ),
    out: str = typer.Option(
        None,
        "--out",
        help="output directory (default: a new runs/stream/MODEL-DATASET-seedK[-N], never an existing one)",
    ),
    target: str = typer.Option(None, "--target", help=TARGET_HELP),
    inputs: str = typer.Option(None, "--inputs", help=INPUTS_HELP),
    dropna: bool = typer.Option(False, "--dropna", help="drop CSV rows with missing values (default: an error)"),
    force: bool = typer.Option(False, "--force", help="replace an --out that holds another run"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar or summary"),
    **place: Any,
) -> None:
    """Stream a dataset through an online model in batches; per batch RMSE, NLPD, M and update time."""
    from ..stream import StreamConfig, run_stream

    columns = _csv_columns(target, inputs, dropna, place)
    config = StreamConfig(
        dataset=dataset,
        model=model,
        batches=batches,
        order=order,
        seed=seed,
        max_size=max_size,
        test_fraction=test_fraction,
        options=parse_model_options(option),
        scaling=scaling,
        dataset_options=columns,
        split=split,
    )
    ds = _open_dataset(dataset, test_fraction, columns, out, force)
    _check_models([model] if model.lower() != "exact" else [], ds.input_dim, option, config.options, dataset, ds.meta)
    out = _output_directory(out, "stream", f"{model.lower()}-{_slug(dataset)}-seed{seed}", force)
    try:
        rows = run_stream(config, out=out, quiet=quiet)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    if not quiet:
        _echo_stream_summary(model, dataset, rows, out)


def _csv_columns(target: str | None, inputs: str | None, dropna: bool, place: dict) -> dict:
    """``stream``'s CSV options for :func:`~onlinegp.tables.read_table`, those left at their defaults left out."""
    given = dict(target=target, inputs=_columns(inputs), dropna=dropna or None)
    place = place | {"lonlat": _columns(place["lonlat"])}
    return {k: v for k, v in given.items() if v} | {k: v for k, v in place.items() if v != FIELD_LOG[k][1].default}


def _echo_stream_summary(model: str, dataset: str, rows: list[dict], out: str) -> None:
    """``stream``'s last line: the last batch's numbers and where they went."""
    last = rows[-1]
    typer.echo(
        f"{model} on {dataset}: {len(rows)} batches, N = {last['num_data']}, M = {last['num_inducing']}, "
        f"RMSE = {last['rmse']:.4f}, NLPD = {last['nlpd']:.4f} (standardised units); wrote {out}"
    )


def _open_dataset(dataset: str, test_fraction: float, columns: dict, out: str | None, force: bool):
    """``stream``'s dataset, its options checked first, and ``--out`` checked (:func:`_check_out`); usage errors."""
    from ...data import load_dataset

    try:
        if not 0 < test_fraction < 1:
            raise ValueError(f"--test-fraction is the held-out fraction, 0 < f < 1; got {test_fraction}")
        if columns and Path(dataset).suffix not in (".csv", ".gz", ".txt"):
            raise ValueError(
                "--target, --inputs, --dropna, --time-unit, --lonlat and --coord-scale are for a CSV --dataset, not a "
                "bundled one"
            )
        ds = load_dataset(dataset, **columns)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    _check_out(out, "stream", force)
    return ds
