"""``onlinegp mission``: a vehicle maps a terrain (the single-vehicle and fleet simulators)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import typer

from ...io import fresh_directory
from ...models.registry import MODELS
from . import Options, _claim, _slug, _taking, app, blame_options, parse_model_options

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
    from ..simulator.fields import ENVIRONMENTS

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

    from ..simulator import fields
    from ..simulator import mission as rig_mission
    from ..simulator import run as mission_run
    from ..simulator.mission_settings import check_run_directory, mission_config

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
        resolved = config.resolved()  # as the mission builds its model
        build = lambda o: rig_mission.build_model(dataclasses.replace(resolved, model_options=o))  # noqa: E731
        raise typer.BadParameter(blame_options(build, items, config.model_options, err)) from err
    except (ValueError, TypeError) as err:
        raise typer.BadParameter(str(err)) from err
    for warning in caught:
        typer.echo(f"warning: {warning.message}", err=True)
    return config, state, mission, default_name


def _warn_pilot_only(mission) -> None:
    """Warn (stderr) when the budget ends within the pilot survey; an impossible budget is a usage error."""
    from ..simulator.mission_settings import pilot_only_warning

    try:
        pilot_only = pilot_only_warning(mission)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    if pilot_only:
        typer.echo(f"warning: {pilot_only}", err=True)


def _run_mission(mission, out: str, quiet: bool, stop_after_epochs: int | None) -> None:
    """Run the opened *mission* into *out* and describe it; Ctrl-C says how to resume (exit 130), a service that
    fails a mission through it is an error (exit 1)."""
    from ...client import ServiceError
    from ..simulator import run as mission_run

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
    from ...client import MapClient, ServiceError
    from ..service.mission import ServiceMission

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
    from ..simulator import fields

    rows = ([(n, d) for n, (_, d) in fields.ENVIRONMENTS.items()] if envs else []) + (
        [(n, d) for n, (_, d) in sorted(MODELS.items())] if models else []
    )
    for name, description in rows:
        typer.echo(f"{name:17s} {description}")
