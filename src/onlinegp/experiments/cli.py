"""The ``onlinegp`` command. Sub-commands live next to the code they run and are registered here."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import typer

from .. import __version__, portable
from ..base import FIRST_BATCH
from ..data import UCI
from ..io import claim_run_directory, fresh_directory, run_kind
from ..models.registry import MODELS
from ..options import parse_options
from .bench.defaults import METHODS as DEFAULTS_METHODS
from .service.cli import serve_app

app = typer.Typer(
    help="Online Gaussian-process mapping: missions, streaming experiments, benchmarks reproducing "
    "published experiments.",
    no_args_is_help=True,
    add_completion=False,
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"onlinegp {__version__}" + (" (portable numerics)" if portable.active() else ""))
        raise typer.Exit()


def _go_portable(value: bool) -> None:
    """Run this command again in the portable mode: restart the process with the mode's environment, which is only
    this command when the flag is on the process's own command line (not when another program calls the app)."""
    if not value or portable.active():
        return
    if "--portable" not in sys.orig_argv[1:]:
        raise typer.BadParameter(
            "--portable restarts the process, and this one is not the onlinegp command itself: set "
            f"{portable.VARIABLE}=1 in the environment before the program that runs it starts"
        )
    os.environ[portable.VARIABLE] = "1"
    portable.restart()  # this command again, with the libraries loaded under the mode's settings


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", help="print the version and exit", callback=_show_version, is_eager=True
    ),
    portable_mode: bool = typer.Option(
        False,
        "--portable",
        help="the portable numeric mode for the command that follows: the same numbers, bit for bit, on any x86-64 "
        "CPU, at a cost in speed (as ONLINEGP_PORTABLE=1; see onlinegp.portable)",
        callback=_go_portable,
        is_eager=True,
    ),
) -> None:
    """Online Gaussian-process mapping: missions, streaming experiments, benchmarks reproducing published
    experiments."""


bench_app = typer.Typer(help="Named experiments reproducing published tables and figures.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")
app.add_typer(serve_app, name="serve")


@app.command("models")
def list_models() -> None:
    """List the registered models."""
    for name, (_, description) in sorted(MODELS.items()):
        typer.echo(f"{name:12s} {description}")


Options = dict[str, tuple[type, typer.models.OptionInfo]]


def _signature_with(declaration: Callable[..., None], options: Options) -> inspect.Signature:
    """``declaration``'s signature with *options* (name: (type, ``typer.Option``)) in place of its ``**keywords``, or
    after its parameters: the signature typer reads for a command called with them all by name."""
    signature = inspect.signature(declaration, eval_str=True)
    own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    keyword = inspect.Parameter.KEYWORD_ONLY
    added = [inspect.Parameter(k, keyword, default=option, annotation=t) for k, (t, option) in options.items()]
    return signature.replace(parameters=[*own, *added])


def _taking(options: Options) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A command's decorator: its ``**keywords`` are *options* (:func:`_signature_with`)."""

    def declare(command: Callable[..., None]) -> Callable[..., None]:
        command.__signature__ = _signature_with(command, options)
        return command

    return declare


# -------------------------------------------------------------------------------------------------------- mission
def parse_model_options(items: list[str] | None) -> dict:
    """Every command's ``--option KEY=VALUE`` items as model keyword arguments (:func:`onlinegp.options.parse_value`
    reads the values: ``sketch=None``, ``lr=0.005``, ``inducing=vips``); a malformed item is a usage error."""
    try:
        return parse_options(items)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err


def list_option(default: str, flag: str, description: str, item: Callable = str):
    """A ``typer.Option`` taking comma-separated items: the command gets them as a list of ``item(text)`` (empty ones
    dropped); *default* and ``--help`` show the text."""
    return typer.Option(default, flag, help=description, callback=lambda text: [item(x) for x in text.split(",") if x])


def seeds_option(default: str, description: str):
    """``--seeds`` of a bench that takes a list of seeds: '0-3', '0,3,5' or '0-2,7', as every bench's ``--seeds``
    (:func:`~onlinegp.experiments.bench.parse.parse_seeds`); the command gets the sorted seeds."""
    from .bench.parse import parse_seeds

    def parse(text: str) -> list[int]:
        try:
            return parse_seeds(text)
        except ValueError as err:
            raise typer.BadParameter(str(err)) from err

    return typer.Option(default, "--seeds", help=f"{description}, e.g. 0-3, 0,3 or 0-2,7", callback=parse)


#: the settings of a mission, the options of ``mission`` that
#: :func:`~onlinegp.experiments.simulator.mission_settings.mission_config` takes by the same names
MISSION_SETTINGS: Options = {
    "env": (
        str,
        typer.Option(
            None,
            "--env",
            help="bundled environment (see --list-envs) or a DEM file (.npy, .npz, .csv, .tif): columns are x (west to "
            "east), row 0 is the south edge (see --first-row); default: valley-ridges, the most non-stationary",
        ),
    ),
    "model": (str, typer.Option("poam", "--model", help="registered model (see --list-models)")),
    "budget": (int, typer.Option(5000, "--budget", help="number of samples to collect")),
    "seed": (int, typer.Option(0, "--seed", help="seed of the planner, noise, start and model")),
    "planner": (
        str,
        typer.Option(
            "max-entropy",
            "--planner",
            help="max-entropy, nipv (integrated-variance reduction, 64 candidates: slower), random or lawnmower",
        ),
    ),
    "init": (str, typer.Option("bezier", "--init", help="pilot survey: bezier, or random (Chen et al. 2024, app. B)")),
    "num_inducing": (int, typer.Option(None, "--num-inducing", help="model size M (model default if unset)")),
    "num_steps": (
        int,
        typer.Option(None, "--num-steps", help="hyper-parameter steps per update (model default if unset)"),
    ),
    "kernel": (str, typer.Option(None, "--kernel", help="ak, rbf, matern12/32/52 (model default if unset)")),
    "inducing": (
        str,
        typer.Option(
            None,
            "--inducing",
            help="inducing-point selector: vips, conditional-variance, "
            "oips (adaptive size, Pescador-Barrios et al. 2024), pivoted, random, kmeans "
            "(model default if unset)",
        ),
    ),
    "animate": (bool, typer.Option(False, "--animate", help="also write mission.gif of the map being built")),
    "profile": (
        str,
        typer.Option(
            "paper",
            "--profile",
            help="simulator settings: paper (the text of Chen et al. "
            "2024: 3 Hz, 1 rad/s turns) or reference-code (their public code: 2.5 Hz, unclipped "
            "turns, nearest-cell field, input scaling fitted on the pilot survey)",
        ),
    ),
    "sensing_rate": (float, typer.Option(None, "--sensing-rate", help="samples per second (overrides the profile)")),
    "max_turn_rate": (float, typer.Option(None, "--max-turn-rate", help="rad/s; inf for none (overrides the profile)")),
    "interpolation": (
        str,
        typer.Option(None, "--interpolation", help="field between cells: linear or nearest (overrides the profile)"),
    ),
    "extent": (
        str,
        typer.Option(
            None,
            "--extent",
            help="DEM file's frame: normalised (default: the paper's box, longer side over [-31, 31] m, aspect ratio "
            "kept, values scaled to 0-255), native (the file's own: a GeoTIFF's georeferencing, or --cell-size; values "
            "in its units) or XMIN,XMAX,YMIN,YMAX in metres",
        ),
    ),
    "cell_size": (
        str,
        typer.Option(
            None, "--cell-size", help="with --extent native: metres per cell (or DX,DY); south-west corner at (0, 0)"
        ),
    ),
    "array": (str, typer.Option(None, "--array", help="which array of an .npz that holds several")),
    "first_row": (
        str,
        typer.Option(None, "--first-row", help="south (default: row 0 is y min) or north (north-up arrays, images)"),
    ),
    "nodata": (
        float,
        typer.Option(
            None, "--nodata", help="cell value meaning no data (NaN always does); filled from the nearest valid cell"
        ),
    ),
    "values": (
        str,
        typer.Option(
            None,
            "--values",
            help="scaled (to 0-255) or native (the file's units); default: scaled iff --extent normalised",
        ),
    ),
    "noise_std": (float, typer.Option(None, "--noise-std", help="sensor noise std in the field's units (default 1)")),
    "speed": (float, typer.Option(None, "--speed", help="vehicle speed in m/s (default 1)")),
    "robots": (
        int,
        typer.Option(
            None,
            "--robots",
            help="vehicles K mapping the field together into one model (default 1: the single-vehicle mission; "
            "--robots 1 runs the fleet simulator, with the same samples and numbers plus its mission-clock column)",
        ),
    ),
    "coordination": (
        str,
        typer.Option(
            None,
            "--coordination",
            help="a fleet's goals: joint (default: max-entropy conditioned on the goals already chosen) or independent",
        ),
    ),
    "budget_distance": (
        float,
        typer.Option(
            None,
            "--budget-distance",
            help="metres each vehicle may drive; the mission ends when every vehicle has (or at --budget samples)",
        ),
    ),
    "schedule": (
        str,
        typer.Option(
            None,
            "--schedule",
            help="when a fleet replans: sync (all vehicles once the slowest has arrived) or async (each vehicle on "
            "arrival, the model updated with every vehicle's new samples at each arrival; the default)",
        ),
    ),
    "fleet": (
        str,
        typer.Option(
            None,
            "--fleet",
            help="shared (default: one model of all samples) or decentralised (each vehicle its own POAM, merged with "
            "vehicles within --comm-radius; metrics of vehicle 0's model)",
        ),
    ),
    "comm_radius": (
        float,
        typer.Option(
            None,
            "--comm-radius",
            help="decentralised: metres within which two vehicles merge (default: half the task's shorter side)",
        ),
    ),
    "merge_theta": (
        str,
        typer.Option(
            None,
            "--merge-theta",
            help="decentralised: a merge's θ, richer (default: the model with more samples) or average",
        ),
    ),
}


@app.command("mission")
@_taking(MISSION_SETTINGS)
def mission_command(
    out: str = typer.Option(
        None,
        "--out",
        help="run directory (default: a new runs/mission/MODEL-ENV-seedK[-N], never an existing one); one that "
        "holds a mission needs --resume or --force",
    ),
    option: list[str] = typer.Option(
        None,
        "--option",
        "-o",
        help="any model constructor argument as KEY=VALUE, "
        "repeatable (e.g. --option sketch=None for POAM's exact M-step)",
    ),
    resume: bool = typer.Option(False, "--resume", help="continue from the run directory's last completed epoch"),
    force: bool = typer.Option(
        False, "--force", help="start over in an --out that holds a mission or another run (emptying it first)"
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar or summary"),
    list_envs: bool = typer.Option(False, "--list-envs", help="list bundled environments and exit"),
    list_models: bool = typer.Option(False, "--list-models", help="list models and exit"),
    stop_after_epochs: int = typer.Option(None, "--stop-after-epochs", hidden=True),
    via: str = typer.Option(None, "--via", help="keep the map in the `onlinegp serve` service at this URL"),
    token: str = typer.Option(None, "--token", envvar="ONLINEGP_TOKEN", help="--via: the vehicle's token"),
    vehicle: str = typer.Option("mission", "--vehicle", help="--via: the vehicle the token is for"),
    **settings: Any,
) -> None:
    """Active mapping: a vehicle surveys a terrain while an online GP maps it and picks the next waypoint."""
    from .simulator.fields import ENVIRONMENTS

    if list_envs or list_models:
        _echo_choices(list_envs, list_models)
        return
    _check_resume(resume, force, out, via)
    service = None if via is None else (via, token, vehicle)
    config, state, mission, default_name = _open_mission(settings, list(option or []), out, resume, force, service)
    if not quiet and config.env.lower() not in ENVIRONMENTS:
        typer.echo(f"field {mission.field.name}: {mission.field.description}")
    if resume and state == "finished":
        typer.echo(f"the mission in {out} is already complete ({mission.num_samples} samples): nothing to resume")
        return
    _warn_pilot_only(mission)
    if out is None:
        out = str(fresh_directory("runs/mission", default_name))
        typer.echo(f"run directory: {out}")
    _claim(out, "mission", force=force, reuse=resume)
    _run_mission(mission, out, quiet, stop_after_epochs)


def _open_mission(
    settings: dict[str, Any], items: list[str], out: str | None, resume: bool, force: bool, service: tuple | None
):
    """The mission of ``mission``'s *settings* and ``--option`` *items* (its config, the state of ``--out``, the opened
    mission, the default run directory's name), through the *service* (URL, token, vehicle) when given; a setting or
    option refused is a usage error, a field warning is shown on stderr."""
    import warnings

    from .simulator import fields
    from .simulator import mission as rig_mission
    from .simulator import run as mission_run
    from .simulator.mission_settings import check_run_directory, mission_config

    try:
        config = mission_config(model_options=parse_model_options(items), **settings)
        state = check_run_directory(out, resume, force)
        robots = f"-k{config.robots}" if config.robots else ""
        default_name = f"{config.model.lower()}-{_slug(config.env)}-seed{config.seed}{robots}"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", fields.FieldWarning)
            if service is None:
                mission = mission_run.open_mission(config, out or Path("runs/mission") / default_name, resume=resume)
            else:
                mission = _service_mission(config, *service)
    except rig_mission.ModelOptionsError as err:
        raise typer.BadParameter(_blame_options(config, items, err)) from err
    except (ValueError, TypeError) as err:
        raise typer.BadParameter(str(err)) from err
    for warning in caught:
        typer.echo(f"warning: {warning.message}", err=True)
    return config, state, mission, default_name


def _warn_pilot_only(mission) -> None:
    """Warn (stderr) when the budget ends within the pilot survey; an impossible budget is a usage error."""
    from .simulator.mission_settings import pilot_only_warning

    try:
        pilot_only = pilot_only_warning(mission)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    if pilot_only:
        typer.echo(f"warning: {pilot_only}", err=True)


def _run_mission(mission, out: str, quiet: bool, stop_after_epochs: int | None) -> None:
    """Run the opened *mission* into *out* and describe it; Ctrl-C says how to resume (exit 130), a service that
    fails a mission through it is an error (exit 1)."""
    from ..client import ServiceError
    from .simulator import run as mission_run

    try:
        result = mission_run.run_mission(
            mission, out, quiet=quiet, stop_after_epochs=stop_after_epochs, echo=typer.echo
        )
    except KeyboardInterrupt:
        typer.echo(f"interrupted; continue with: onlinegp mission --resume --out {out} (same options)", err=True)
        raise typer.Exit(130) from None
    except (OSError, ServiceError) as err:
        if not mission.provenance():  # not a mission through a service: not the service's failure
            raise
        typer.echo(f"error: the service failed during the mission: {err} (the epochs before are in {out})", err=True)
        raise typer.Exit(1) from None
    if not quiet:
        typer.echo(
            mission_run.describe(result)
            if result.completed
            else f"stopped after epoch {result.rows[-1]['epoch']}; continue with --resume --out {out}"
        )


def _service_mission(config, url: str, token: str | None, vehicle: str):
    """The mission through the service at *url*, posting as *vehicle* with *token*; a service that cannot be reached
    or refuses the token is a ValueError."""
    from ..client import MapClient, ServiceError
    from .service.mission import ServiceMission

    if not token:
        raise ValueError("--via needs the vehicle's token: --token TOKEN or ONLINEGP_TOKEN (onlinegp serve token add)")
    try:
        return ServiceMission(config, MapClient(url, token), vehicle)
    except (OSError, ServiceError) as err:
        raise ValueError(f"cannot use the service at {url}: {err}") from err


def _check_resume(resume: bool, force: bool, out: str | None, via: str | None = None) -> None:
    """``mission --resume`` takes the ``--out`` to continue, and no ``--force`` or ``--via``."""
    if resume and via:
        raise typer.BadParameter("a mission through a service (--via) does not resume: start it again on a new service")
    if resume and force:
        raise typer.BadParameter("--resume continues the mission in --out and --force starts it over: pass one")
    if resume and out is None:
        raise typer.BadParameter("--resume needs --out DIR, the run directory of the mission to continue")


def _echo_choices(envs: bool, models: bool) -> None:
    """``mission --list-envs`` and ``--list-models``: the bundled environments, then the registered models."""
    from .simulator import fields

    rows = ([(n, d) for n, (_, d) in fields.ENVIRONMENTS.items()] if envs else []) + (
        [(n, d) for n, (_, d) in sorted(MODELS.items())] if models else []
    )
    for name, description in rows:
        typer.echo(f"{name:17s} {description}")


def _claim(out: str | Path, kind: str, **how: bool) -> None:
    """:func:`~onlinegp.io.claim_run_directory`, its refusal (another run's files, or a run still writing there) a
    usage error."""
    try:
        claim_run_directory(out, kind, **how)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err


def _slug(name: str) -> str:
    """A bundled environment's or dataset's name as given, a file's stem."""
    return Path(name).stem if ("/" in name or "." in name) else name


def _blame_options(config, items: list[str], err: Exception) -> str:
    """``err`` (the model refused its options) naming the ``--option`` items it refused: each one the model rejects
    on its own, with its reason, else all of them with ``err``; unchanged when the model fails without any of them."""
    from .simulator import mission as rig_mission

    parsed = {item: parse_options([item]) for item in items}
    base = {k: v for k, v in config.model_options.items() if not any(k in p for p in parsed.values())}
    config = config.resolved()  # as the mission builds its model

    def failure(extra: dict) -> Exception | None:
        try:
            rig_mission.build_model(dataclasses.replace(config, model_options={**base, **extra}))
        except (ValueError, TypeError) as reason:
            return reason
        return None

    if not parsed or failure({}) is not None:
        return str(err)
    bad = {item: reason for item, p in parsed.items() if (reason := failure(p)) is not None}
    if not bad:
        return ", ".join(f"--option {item}" for item in parsed) + f": {err}"
    return "; ".join(f"--option {item}: {reason}" for item, reason in bad.items())


# -------------------------------------------------------------------------------------------------------- replay
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
    from .replay import run_replay

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
    from .replay import load_survey

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
    refuses, with the model's reason (or the model's error when it fails without them)."""
    from ..models.registry import make_model

    parsed = {item: parse_model_options([item]) for item in items or []}
    base = {k: v for k, v in options.items() if not any(k in p for p in parsed.values())}

    def failure(extra: dict) -> Exception | None:
        try:
            make_model(name, input_dim, **base, **extra)
        except (ValueError, TypeError) as reason:
            return reason
        return None

    err = failure({k: v for p in parsed.values() for k, v in p.items()})
    if err is None:
        return
    if not parsed or failure({}) is not None:
        raise typer.BadParameter(str(err))
    bad = {item: reason for item, p in parsed.items() if (reason := failure(p)) is not None}
    raise typer.BadParameter(
        "; ".join(f"--option {item}: {reason}" for item, reason in bad.items())
        or ", ".join(f"--option {item}" for item in parsed) + f": {err}"
    )


# -------------------------------------------------------------------------------------------------------- bench
#: every bench command: its name, the module of onlinegp.experiments.bench whose ``BENCHES`` holds it
BENCH_MODULES: dict[str, str] = {}


def bench_command(
    name: str,
    module: str,
    quiet: str = "no progress bar or table",
    options: Options | None = None,
    workers: bool = False,
    ray: bool = False,
):
    """Register ``onlinegp bench NAME``, the one way every bench is registered: the command runs the
    :class:`~onlinegp.experiments.bench.protocol.Bench` ``BENCHES[NAME]`` of ``onlinegp.experiments.bench.<module>``
    (imported when run; see :func:`_run_bench`). The decorated function declares the bench's own options, named as the
    fields of the bench's options dataclass (its docstring is the help); *options* (name: (type, ``typer.Option``))
    follow them, then the options every bench shares (:func:`_common_options`: ``--quiet`` with help *quiet*,
    ``--workers`` where *workers*, ``--backend`` and ``--address`` where *ray*, the results tree's options)."""

    BENCH_MODULES[name] = module

    def register(declaration: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(declaration)
        def command(**arguments: Any) -> None:
            _run_bench(name, module, arguments)

        common = _common_options(name, quiet, workers, ray)
        command.__signature__ = _signature_with(declaration, {**(options or {}), **common})
        return bench_app.command(name)(command)

    return register


def _common_options(name: str, quiet: str, workers: bool, ray: bool) -> Options:
    """The options every bench takes (``--out``, ``--quiet``, ``--force``, the results tree's ``--results``,
    ``--no-results``, ``--resume/--fresh``) and those a bench takes where it runs in parallel (``--workers``) or on
    Ray (``--backend``, ``--address``): :func:`_run_bench` takes them off before calling the bench."""
    from .bench.protocol import default_out

    return {
        "out": (
            str,
            typer.Option(default_out(name), "--out", help="output directory (finished runs are skipped on rerun)"),
        ),
        **({"workers": (int, WORKERS(ray))} if workers else {}),
        **(_ray_options() if ray else {}),
        "quiet": (bool, typer.Option(False, "--quiet", "-q", help=quiet)),
        **_results_options(),
        "force": (
            bool,
            typer.Option(False, "--force", help="replace an --out that holds another run (its own runs are resumed)"),
        ),
    }


def WORKERS(ray: bool = False) -> typer.models.OptionInfo:  # noqa: N802 - a fresh Option per command, as typer needs
    where = "local processes, or Ray slots with --backend ray; " if ray else ""
    return typer.Option(1, "--workers", help=f"parallel runs ({where}timings are only comparable with 1)")


def _ray_options() -> Options:
    """``--backend`` and ``--address`` of a bench that runs on Ray too."""
    return {
        "backend": (str, typer.Option("local", "--backend", help="local (worker processes) or ray")),
        "address": (
            str,
            typer.Option(
                None,
                "--address",
                help="Ray cluster HOST:PORT or auto (--backend ray); without it a local Ray instance is started",
            ),
        ),
    }


def _results_options() -> Options:
    """The committed-results options of a sweep (onlinegp.experiments.bench.runner)."""
    from .bench.runner import RESULTS_ENV

    return {
        "results": (
            str,
            typer.Option(
                None,
                "--results",
                envvar=RESULTS_ENV,
                help="results tree: every finished run's summary is kept in DIR/BENCH/CONFIG_HASH and a run found "
                "there is restored, not run (default: results/ of the onlinegp git checkout, else of the current "
                "directory)",
            ),
        ),
        "no_results": (bool, typer.Option(False, "--no-results", help="neither use nor keep a results tree")),
        "kept_only": (
            str,
            typer.Option(
                None,
                "--kept-only",
                hidden=True,  # bench report's: its --out is a scratch directory
                help="run nothing: restore every run from the runs of this version kept in --results",
            ),
        ),
        "resume": (
            bool,
            typer.Option(
                True,
                "--resume/--fresh",
                help="skip runs finished in --out or kept in --results (default), or run every run again, replacing "
                "its directory and kept summary",
            ),
        ),
    }


#: the options of :func:`_common_options` that become the sweep's RunnerOptions
RUNNER_OPTIONS = ("workers", "backend", "address", "quiet", "results", "no_results", "resume", "kept_only")


def _run_bench(name: str, module: str, arguments: dict[str, Any]) -> None:
    """Run bench *name* of ``bench.<module>`` with the command's *arguments*: take ``--out`` (a usage error when it
    holds another run, unless ``--force``; a rerun of the same bench continues there) and the runner's options off,
    build the bench's options from the rest and start it, show its result; a ValueError is a usage error, a failed
    run exit 1 where the bench says so."""
    from .bench.runner import RunnerOptions, resolve_results

    out, force = arguments.pop("out"), arguments.pop("force")
    runner = {k: arguments.pop(k) for k in RUNNER_OPTIONS if k in arguments}
    _claim(out, f"bench {name}", force=force, reuse=True)
    bench = importlib.import_module(f"{__package__}.bench.{module}").BENCHES[name]
    try:
        fresh = not runner.pop("resume", True)
        results = resolve_results(runner.pop("results", None), not runner.pop("no_results", True))
        options = RunnerOptions(**runner, results=results, fresh=fresh)
        value = bench.start(bench.options(**arguments), out, options, typer.echo)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    code = bench.show(value, options.quiet, typer.echo)
    if code:
        raise typer.Exit(code)


# -------------------------------------------------------------------------------------------------------- bench wgpr
@bench_command("wgpr", "wgpr", quiet="no progress bar or tables", workers=True, ray=True)
def bench_wgpr(
    datasets: str = typer.Option("toy,kin40k,pumadyn32nm,bathymetry", "--datasets", help="comma-separated"),
    methods: str = typer.Option("lgpr,wgpr,solar-gp,ovfe", "--methods", help="comma-separated"),
    sweep: str = typer.Option(
        "kin40k",
        "--sweep",
        help="datasets for the models-vs-threshold sweep (Fig. 2: the grids of WGPR and SOLAR-GP among --methods); "
        "'' for none",
    ),
    max_points: int = typer.Option(
        None, "--max-points", help="cut every stream to this many points (default: the paper's sizes, see the docs)"
    ),
    max_test: int = typer.Option(2000, "--max-test", help="test points per UCI dataset"),
    member_steps: int = typer.Option(None, "--member-steps", help="L-BFGS iterations per OSGPR update (default 200)"),
    optimize_inducing: bool = typer.Option(
        True,
        "--optimize-inducing/--fixed-inducing",
        help="move the sparse models' pseudo-inputs with θ, as the paper (default), or keep the pivoted-Cholesky Z",
    ),
    seeds: str = typer.Option("0-4", "--seeds", help="trials (split, subsample and model seed), e.g. 0-4 or 0,3"),
) -> None:
    """Kepler et al. 2021 (WGPR): two-regime toy, Tables II-III (time, RMSE) and RMSE/rate vs number of models
    (Fig. 2)."""


# -------------------------------------------------------------------------------------------------------- bench poam
def _poam_options() -> Options:
    """The options the experiments of Chen et al. 2024 share (onlinegp.experiments.bench.poam), after their own."""
    return {
        "seeds": (str, typer.Option("0-9", "--seeds", help="seeds, e.g. 0-9, 0,3,5 or 0-2,7")),
        "budget": (int, typer.Option(5000, "--budget", help="samples per mission")),
        "num_inducing": (int, typer.Option(500, "--num-inducing", help="inducing points M")),
        "num_steps": (int, typer.Option(10, "--num-steps", help="gradient steps per decision epoch")),
        "profile": (
            str,
            typer.Option(
                "paper",
                "--profile",
                help="simulator settings: paper (its text: 3 Hz, 1 rad/s turns, bilinear field) or reference-code "
                "(its implementation, which made its numbers: 2.5 Hz, no turn limit, nearest cell, pilot scaling)",
            ),
        ),
    }


def _poam_command(name: str):
    """:func:`bench_command` for the experiment *name* of Chen et al. 2024: its own options, then
    :func:`_poam_options`, then the common ones (on Ray too)."""
    return bench_command(name, "poam", options=_poam_options(), workers=True, ray=True)


@_poam_command("poam-table1")
def bench_poam_table1(
    envs: str = typer.Option(
        "paper-env2,paper-env3",
        "--envs",
        help="comma-separated bundled environments (or .npy/.npz/.tif files); default: the paper's own Env2 and Env3",
    ),
    methods: str = typer.Option("ssgp++,ovc,ovc++,poam,full", "--methods", help="comma-separated registered models"),
) -> None:
    """Chen et al. 2024, Table I, Fig. 5 and Fig. 7: SSGP++, OVC, OVC++, POAM, FULL with the Attentive Kernel."""


@_poam_command("poam-ablation")
def bench_poam_ablation(
    envs: str = typer.Option(
        "valley-ridges", "--envs", help="comma-separated environments (Chen et al. 2024: Env1 only)"
    ),
    methods: str = typer.Option(
        "poam,z-opt,z-rand,z-kmeans,var-opt,var-ssgp,online-elbo", "--methods", help="comma-separated registered models"
    ),
) -> None:
    """Ablation study of Chen et al. 2024 (§V-C, Fig. 8): POAM against its variants."""


@_poam_command("poam-robustness")
def bench_poam_robustness(
    envs: str = typer.Option(
        "valley-ridges,dissected-ridges,plateau,coast,seafloor", "--envs", help="comma-separated environments"
    ),
    methods: str = typer.Option("ssgp++,ovc,ovc++,poam,full", "--methods", help="comma-separated registered models"),
    settings: str = typer.Option(
        "random-init,random-planner", "--settings", help="random-init (max-entropy planner) and/or random-planner"
    ),
) -> None:
    """Chen et al. 2024, appendix B (Fig. 9): random initialisation and random planner, with FULL."""


@bench_command("fleet", "fleet", workers=True)
def bench_fleet(
    envs: str = list_option(
        "valley-ridges,dissected-ridges,plateau,coast,seafloor,paper-env2,paper-env3",
        "--envs",
        "comma-separated environments (default: the bundled terrains and the POAM paper's two)",
    ),
    robots: str = list_option("1,2,4", "--robots", "comma-separated fleet sizes K", int),
    coordinations: str = list_option(
        "joint,independent", "--coordinations", "how fleets of K > 1 choose goals: joint and/or independent"
    ),
    schedules: str = list_option(
        "async",
        "--schedules",
        "when fleets of K > 1 replan: sync, async and/or sync-ksteps (sync with K times --num-steps per epoch)",
    ),
    fleets: str = list_option(
        "shared",
        "--fleets",
        "how fleets of K > 1 keep their map: shared (one model) and/or decentralised (one POAM per vehicle, merged "
        "in range)",
    ),
    comm_radius: float = typer.Option(None, "--comm-radius", help="decentralised fleets' radius (m; as the mission's)"),
    merge_theta: str = typer.Option(
        None, "--merge-theta", help="decentralised fleets' θ at a merge (as the mission's)"
    ),
    seeds: str = typer.Option("0-4", "--seeds", help="seeds, e.g. 0-4, 0,3 or 0-2,7"),
    budget: int = typer.Option(5000, "--budget", help="samples per mission, all vehicles together"),
    num_inducing: int = typer.Option(500, "--num-inducing", help="inducing points M"),
    num_steps: int = typer.Option(10, "--num-steps", help="gradient steps per decision epoch"),
    target_smse: float = typer.Option(
        None, "--target-smse", help="SMSE whose mission time is reported (default: K = 1's final SMSE, same seed)"
    ),
    profile: str = typer.Option("paper", "--profile", help="simulator settings: paper or reference-code"),
) -> None:
    """Multi-robot active mapping: K = 1, 2, 4 vehicles, one POAM model, equal total samples; final
    SMSE/MSLL and the mission time to reach K = 1's final SMSE, joint against independent goals."""


# --------------------------------------------------------------------------------- WISKI (Stanton et al. 2021)
_WISKI_OPTIONS = {
    "pretrain_steps": lambda: typer.Option(
        100, "--pretrain-steps", help="optimiser steps on the 5% pre-training batch"
    ),
    "seed": lambda: typer.Option(0, "--seed"),
}


@bench_command("wiski-bo", "wiski", workers=True)
def bench_wiski_bo(
    functions: str = list_option(
        "levy,ackley,styblinski-tang,rastrigin,griewank,michalewicz",
        "--functions",
        "comma-separated noisy 3-D BoTorch test functions (default: the six of Stanton et al. 2021, appendix C.2)",
    ),
    models: str = list_option("wiski,exact", "--models", "comma-separated registered models"),
    iterations: int = typer.Option(20, "--iterations", help="BO iterations (q points each)"),
    seeds: str = seeds_option("0", "seeds"),
    grid_size: int = typer.Option(8, "--grid-size", help="WISKI grid points per dimension (m = g³)"),
    steps: int = typer.Option(5, "--steps", help="Adam steps per BO iteration (50 on the initial points)"),
    fit: str = typer.Option(
        "adam", "--fit", help="'adam' (--steps steps) or 'lbfgs': WISKI and the exact GP fitted to convergence (paper)"
    ),
    num_restarts: int = typer.Option(4, "--num-restarts", help="L-BFGS-B restarts of the acquisition (paper: 10)"),
    raw_samples: int = typer.Option(64, "--raw-samples", help="random samples to start them from (paper: 512)"),
    beta: float = typer.Option(2.0, "--beta", help="UCB's β at the first iteration"),
    beta_decay: float = typer.Option(
        1.0,
        "--beta-decay",
        help="β is multiplied by this every iteration (the authors' code: --beta 1 --beta-decay 0.9)",
    ),
    kernel: str = typer.Option(
        "rbf",
        "--kernel",
        help="'rbf' (ARD, no priors) or 'authors': their code's Matérn-5/2 with Gamma priors (WISKI: its product form)",
    ),
    n_init: int = typer.Option(
        5, "--n-init", help="random initial points (the paper's text: 5; the authors' code: 10)"
    ),
) -> None:
    """Stanton et al. 2021, §5.3: batch UCB (q = 3) on noisy 3-D test functions with WISKI and an exact GP."""


@bench_command("wiski-uci", "wiski", workers=True)
def bench_wiski_uci(
    datasets: str = list_option("skillcraft,elevators,protein,kin40k", "--datasets", "comma-separated UCI sets"),
    models: str = list_option(
        "wiski,osgpr,osvgp,exact", "--models", "comma-separated registered models, all on the shared learnt projection"
    ),
    all_input_models: str = list_option(
        "wiski,osgpr", "--all-input-models", "comma-separated models also run on all D inputs (a second table)"
    ),
    max_points: int = typer.Option(500, "--max-points", help="points streamed one at a time after pre-training"),
    eval_every: int = typer.Option(50, "--eval-every", help="evaluate on the test set every this many points"),
    max_test: int = typer.Option(1000, "--max-test", help="at most this many test points"),
    pretrain_steps: int = typer.Option(
        200, "--pretrain-steps", help="full-batch steps on the 5% pre-training batch (Table C.1: 200 epochs)"
    ),
    exact_max: int = typer.Option(1500, "--exact-max", help="run the exact GP only up to this many points"),
    batch_exact_max: int = typer.Option(
        5000,
        "--batch-exact-max",
        help="the hindsight exact GP (L-BFGS on all points seen, at every evaluation) on streams up to this many points",
    ),
    seeds: str = seeds_option("0", "seeds (split and shuffle)"),
) -> None:
    """Stanton et al. 2021, §5.1: online regression, one point and one step at a time (test NLL, RMSE, update time)."""


@bench_command("wiski-rank", "wiski", workers=True)
def bench_wiski_rank(
    dataset: str = typer.Option("skillcraft", "--dataset", help="UCI set (the paper's: skillcraft)"),
    grid_sizes: str = list_option(
        "16,32", "--grid-sizes", "grid points per dimension: 16 (m = 256), 32 (m = 1024)", int
    ),
    updates: str = list_option("gill,truncate", "--updates", "root updates: gill (the paper's), truncate (ours)"),
    ranks: str = list_option(
        "", "--ranks", "comma-separated ranks r of the paper's table to run (default: all of each grid size's)", int
    ),
    seeds: str = seeds_option("0", "seeds (split and shuffle)"),
    max_points: int = typer.Option(None, "--max-points", help="cut the stream to this many points (default: all)"),
    eval_every: int = typer.Option(500, "--eval-every", help="evaluate on the test set every this many points"),
    pretrain_steps: int = typer.Option(
        200, "--pretrain-steps", help="full-batch steps on the 5% pre-training batch (Table C.1: 200 epochs)"
    ),
) -> None:
    """Stanton et al. 2021, appendix: WISKI's test NLL against the rank r of its root of WᵀW (m = 256 and 1024)."""


@bench_command("wiski-banana", "wiski", quiet="no progress bar")
def bench_wiski_banana(
    pretrain_steps: int = _WISKI_OPTIONS["pretrain_steps"](),
    eval_every: int = typer.Option(20, "--eval-every", help="evaluate every this many points"),
    grid_size: int = typer.Option(16, "--grid-size", help="grid points per dimension (m = g²)"),
    seed: int = _WISKI_OPTIONS["seed"](),
) -> None:
    """Stanton et al. 2021, §5.2: online Dirichlet classification on banana with WISKI
    (accuracy, NLL vs points seen)."""


# ---------------------------------------------------------------------------------------------- streaming + VIPS
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
    from .stream import StreamConfig, run_stream

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
    from ..data import load_dataset

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


@bench_command("vips-table1", "vips", workers=True)
def bench_vips_table1(
    datasets: str = list_option(
        ",".join(("concrete", "skillcraft", "elevators", "bike", "kin40k", "pumadyn32nm")),
        "--datasets",
        "comma-separated UCI sets",
    ),
    methods: str = list_option("exact,cv,oips,vips", "--methods", "comma-separated: exact, cv, oips, vips"),
    splits: int = typer.Option(5, "--splits", help="number of 80/20 splits (seeds 0..splits-1)"),
    max_size: int = typer.Option(None, "--max-size", help="subsample each dataset to this many rows (fast runs)"),
    batches: int = typer.Option(None, "--batches", help="override the 20 (<12000 points) / 50 batches"),
    exact_max: int = typer.Option(6000, "--exact-max", help="skip the exact GP above this many training points"),
    num_steps: int = typer.Option(None, "--num-steps", help="cap L-BFGS iterations per batch (default 200)"),
    ard: bool = typer.Option(False, "--ard", help="one length-scale per input (Pescador-Barrios et al. 2024: shared)"),
    lengthscale: float = typer.Option(
        1.0,
        "--lengthscale",
        help="initial length-scale in standard deviations (Pescador-Barrios et al. 2024: 1)",
    ),
    lengthscale_prior: bool = typer.Option(
        False,
        "--lengthscale-prior/--no-lengthscale-prior",
        help="the library's log-normal length-scale prior above 3 inputs (Pescador-Barrios et al. 2024: none)",
    ),
    split: str = typer.Option(
        "random",
        "--split",
        help="random 80/20 splits (Pescador-Barrios et al. 2024's text) or chunked: the folds of sorted chunks of "
        "the authors' code",
    ),
    row_index: bool = typer.Option(
        False,
        "--row-index",
        help="the row's index in the file as the first input, as the authors' elevators and bike files: the stream "
        "is then in file order",
    ),
    order: str = typer.Option(
        "sorted",
        "--order",
        help="the training stream's order: sorted by the first input (Pescador-Barrios et al. 2024's text), given "
        "(the file's: the authors' stream without their index as an input) or random",
    ),
) -> None:
    """Pescador-Barrios et al. 2024, Table 1 (+ NLPD, Figs. 3/6): exact GP, Conditional Variance, OIPS, VIPS on sorted
    UCI streams."""


@bench_command("defaults", "defaults", workers=True)
def bench_defaults(
    datasets: str = list_option(",".join(UCI), "--datasets", "comma-separated bundled UCI sets"),
    methods: str = list_option(
        ",".join(DEFAULTS_METHODS),
        "--methods",
        "comma-separated registered streaming models, and sgpr: the batch sparse GP of the same size (a reference)",
    ),
    splits: int = typer.Option(3, "--splits", help="seeded shuffles (seeds 0..splits-1)"),
    train_size: int = typer.Option(2000, "--train-size", help="training points streamed (fewer on small sets)"),
    test_size: int = typer.Option(1000, "--test-size", help="held-out points (at most 40% of a set)"),
    batch_size: int = typer.Option(100, "--batch-size", help="points per update"),
    exact_iterations: int = typer.Option(100, "--exact-iterations", help="L-BFGS iterations of the exact GP"),
) -> None:
    """Every streaming regression method with its defaults against the exact GP on the bundled UCI sets (RMSE ratio,
    NLPD difference, worst NLPD, update time): the regression check of the defaults."""


@bench_command("vips-magnetic", "vips", quiet="no progress bar or summary")
def bench_vips_magnetic(
    thin: int = typer.Option(10, "--thin", help="keep one reading in this many (the survey has ~9000 per path)"),
    batches: int = typer.Option(20, "--batches", help="batches for trajectory 3"),
    eta: float = typer.Option(2.2, "--eta", help="Conditional Variance tolerance (Pescador-Barrios et al. 2024: 2.2)"),
    delta: float = typer.Option(0.05, "--delta", help="VIPS tolerance"),
    num_steps: int = typer.Option(None, "--num-steps", help="cap L-BFGS iterations per batch"),
) -> None:
    """Pescador-Barrios et al. 2024, §5.4: magnetic-field maps path by path (VIPS), and trajectory 3 in batches
    (VIPS vs CV)."""


@bench_command("vips-synthetic", "vips", workers=True)
def bench_vips_synthetic(
    seeds: str = seeds_option("0-4", "seeds (data, test noise and model)"),
    datasets: str = list_option(
        "synthetic1,synthetic2,synthetic3", "--datasets", "comma-separated Fig. 1 sets (appendix F.1)"
    ),
    fixed: str = list_option("10,20,30", "--fixed", "comma-separated fixed sizes M for Fig. 2a", int),
    fig2a: bool = typer.Option(True, "--fig2a/--no-fig2a", help="also run Fig. 2a (fixed M vs VIPS vs exact GP)"),
    fig2a_size: int = typer.Option(1000, "--fig2a-size", help="points of the Fig. 2a set (appendix F.2.1: 1000)"),
    fig2a_batches: int = typer.Option(4, "--fig2a-batches", help="equal batches of the Fig. 2a set (§5.2: 4)"),
    num_steps: int = typer.Option(None, "--num-steps", help="cap L-BFGS iterations per batch (default 200)"),
    exact: bool = typer.Option(True, "--exact/--no-exact", help="the exact GP reference in Fig. 2a"),
) -> None:
    """Pescador-Barrios et al. 2024, Figs. 1 and 2a: M chosen by VIPS on synthetic sets 1-3, and fixed M = 10/20/30 vs
    VIPS vs the exact GP on a 1000-point set."""


@bench_app.command("verify")
def bench_verify(
    runs: list[str] = typer.Argument(None, help="kept runs to verify: <bench>/<key>, a bench, or a run id"),
    sample: int = typer.Option(None, "--sample", min=1, help="a random sample of this many kept runs of this version"),
    seed: int = typer.Option(0, "--seed", help="seed of the sample"),
    results: Path = typer.Option(None, "--results", help="the results tree (default: this checkout's results/)"),
) -> None:
    """Run kept results again and report any whose numbers no longer reproduce exactly (wall-clock figures aside).
    A run of the portable mode reproduces exactly under `onlinegp --portable` on any CPU; a default-mode run made on
    another machine kind is 'close' when every result moved less than its repeats' spread. Exits 1 when one differs
    or fails."""
    from .bench.runner import resolve_results
    from .bench.verify import verify

    try:
        verdicts = verify(resolve_results(results), runs or (), sample, seed, echo=typer.echo)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    counts = {s: sum(v.status == s for v in verdicts) for s in ("reproduced", "close", "differs", "failed", "skipped")}
    typer.echo(", ".join(f"{n} {s}" for s, n in counts.items() if n))
    if counts["differs"] or counts["failed"]:
        raise typer.Exit(1)


def invoke(words: Sequence[str]) -> None:
    """Run one ``onlinegp`` command line (``words``: what follows ``onlinegp``) in this process, its errors raised
    rather than printed (how ``bench report`` runs the command of each block)."""
    app(list(words), standalone_mode=False)


@bench_app.command("report")
def bench_report(
    pages: list[Path] = typer.Argument(None, help="pages to render (default: docs/results/*.md and README.md)"),
    check: bool = typer.Option(False, "--check", help="compare only: exit 1 when a page differs from its rendering"),
    results: Path = typer.Option(None, "--results", help="the results tree (default: this checkout's results/)"),
) -> None:
    """Render the tables of the results pages again from the kept runs alone (each `<!-- report: ... -->` block of a
    page names its command, output file and version). Runs nothing: a block whose runs are not kept fails."""
    from .bench.report import default_pages, render
    from .bench.runner import default_results_root, resolve_results

    try:
        root = default_results_root()
        pages = pages or default_pages(root.parent)
        changed = render(pages, resolve_results(results), invoke, check=check, echo=typer.echo)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    verb = "differ from their rendering" if check else "rewritten"
    typer.echo(f"{len(changed)} page(s) {verb}" + (f": {', '.join(p.name for p in changed)}" if changed else ""))
    if check and changed:
        raise typer.Exit(1)
