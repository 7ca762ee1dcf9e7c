"""``onlinegp mission``: a vehicle maps a terrain (the single-vehicle and fleet simulators)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import typer

from ...io import fresh_directory
from ...models.registry import MODELS
from ..simulator.mission import MissionConfig
from . import _claim, _slug, _taking, app, blame_options, declared_options, parse_model_options


@app.command("mission")
@_taking(declared_options(MissionConfig))
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
