"""``onlinegp serve DIR``: the live mapping service over a run directory; ``onlinegp serve token add NAME DIR``;
``onlinegp serve demo``: the service with simulated vehicles.

``onlinegp serve DIR ...`` is ``onlinegp serve run DIR ...`` (:class:`ServeGroup` supplies the ``run``). FastAPI and
uvicorn (the ``serve`` extra) are imported only when the service starts.
"""

from __future__ import annotations

import functools
import ipaddress
import math
import time
from pathlib import Path

import typer
from typer.core import TyperGroup

from ...io import claim_run_directory, fresh_directory, run_kind
from ...options import model_options, parse_options
from ..simulator.fields import bundled
from .demo import demo_config, start_vehicles
from .state import CONFIG, ServiceConfig
from .store import Store

SERVE_EXTRA = 'pip install "onlinegp[serve]"'


class ServeGroup(TyperGroup):
    """``serve``'s commands, ``run`` the default: ``onlinegp serve DIR`` runs the service over DIR."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


serve_app = typer.Typer(
    cls=ServeGroup,
    help="A live mapping service: vehicles post observations, the map stays current, a page shows it.",
    no_args_is_help=True,
)
token_app = typer.Typer(help="Vehicles' write tokens (stored hashed in the run directory).", no_args_is_help=True)
serve_app.add_typer(token_app, name="token")


def parse_area(text: str | None) -> tuple[float, float, float, float] | None:
    """``XMIN,XMAX,YMIN,YMAX`` as four floats (None for None); a usage error otherwise."""
    if text is None:
        return None
    try:
        area = tuple(float(v) for v in text.split(","))
        if len(area) != 4:
            raise ValueError(f"four numbers, got {len(area)}")
        ServiceConfig(area=area)
    except ValueError as err:
        raise typer.BadParameter(f"--area is XMIN,XMAX,YMIN,YMAX: {err}") from err
    return area


def parse_origin(text: str | None) -> dict | None:
    """``LON,LAT`` in degrees as the frame of its UTM zone with its origin there (None for None); a usage error
    otherwise."""
    if text is None:
        return None
    from ...geo import LocalFrame

    try:
        lon, lat = (float(v) for v in text.split(","))
        return LocalFrame.around(lon, lat).to_dict()
    except ImportError as err:
        raise typer.BadParameter(f"--origin needs pyproj: pip install 'onlinegp[geo]' ({err})") from err
    except ValueError as err:
        raise typer.BadParameter(f"--origin is LON,LAT in degrees: {err}") from err


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _config(run_dir: Path, resume: bool, given: dict, option: list[str]) -> ServiceConfig | None:
    """A new service's config from the options ``given`` (None: not given), or None on --resume (which takes the
    recorded one; options that would change it are refused)."""
    if resume:
        changed = [f"--{k.replace('_', '-')}" for k, v in given.items() if v is not None] + (
            ["--option"] if option else []
        )
        if changed:
            raise typer.BadParameter(f"--resume takes the service as {run_dir / CONFIG} records it; drop {changed}")
        return None
    if given["area"] is None:
        raise typer.BadParameter("a new service needs its survey area: --area XMIN,XMAX,YMIN,YMAX")
    try:
        options = model_options(option)
        return ServiceConfig(**{k: v for k, v in given.items() if v is not None}, options=options)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err


def _web_stack(limit: list[str] | None = None):
    """uvicorn and :func:`~.app.create_app` with the ``--limit`` items applied, or a usage error naming the extra to
    install or the limit refused."""
    try:
        import uvicorn

        from .app import Limits, create_app
    except ImportError as err:
        raise typer.BadParameter(f"onlinegp serve needs the serve extra ({err.name}): {SERVE_EXTRA}") from err
    try:
        limits = Limits.of(parse_options(limit))
    except ValueError as err:
        raise typer.BadParameter(f"--limit: {err}") from err
    return uvicorn, functools.partial(create_app, limits=limits)


def _serve(uvicorn, app, host: str, port: int) -> None:
    """Run ``app`` on ``host``:``port`` until interrupted, warning first when it is reachable beyond this machine."""
    if not is_loopback(host):
        typer.echo(
            f"warning: serving on {host}, beyond this machine, over plain HTTP: tokens and data cross the network "
            "in clear; put a TLS terminator (a reverse proxy with HTTPS) in front of it",
            err=True,
        )
    state = app.state.service.state
    area, n = list(state.config.area), state.model.num_data
    typer.echo(f"serving {state.config.model} over {area} at http://{host}:{port}/ (N={n}; {state.run_dir})")
    uvicorn.run(app, host=host, port=port, log_level="warning")


@serve_app.command("run")
def serve_command(  # noqa: PLR0913 - a typer command: one parameter per option
    run_dir: Path = typer.Argument(..., help="the run directory: log, checkpoint, tokens"),
    model: str = typer.Option(None, "--model", help="registered model (default poam)"),
    area: str = typer.Option(None, "--area", help="survey area XMIN,XMAX,YMIN,YMAX (needed for a new service)"),
    batch_size: int = typer.Option(None, "--batch-size", help="a batch closes at this many rows (default 50)"),
    batch_seconds: float = typer.Option(None, "--batch-seconds", help="... or when its oldest row is this old (2)"),
    option: list[str] = typer.Option([], "--option", "-o", help="model option KEY=VALUE, e.g. -o num_inducing=100"),
    host: str = typer.Option("127.0.0.1", "--host", help="address to bind (default loopback only)"),
    port: int = typer.Option(8000, "--port", help="port"),
    resume: bool = typer.Option(False, "--resume", help="restore DIR's checkpoint and replay its log after it"),
    protect_reads: bool = typer.Option(False, "--protect-reads", help="reads need a vehicle's token too"),
    unit: str = typer.Option(None, "--unit", help="the unit of the field's values, for the page (e.g. 'mg/L')"),
    seed: int = typer.Option(None, "--seed", help="seeds the model's construction and the planner (default 0)"),
    close_on: str = typer.Option(
        None, "--close-on", help="size-or-age (default: --batch-size, --batch-seconds) or request (POST /batches)"
    ),
    origin: str = typer.Option(
        None, "--origin", help="LON,LAT: the area is metres east and north of it (its UTM zone; the geo extra)"
    ),
    limit: list[str] = typer.Option(
        [],
        "--limit",
        help="a request limit KEY=VALUE: max_rows (10000), max_bytes, requests_per_second (50), max_cells",
    ),
) -> None:
    """Serve the map of DIR: POST /observations, GET /map, /status, POST /vehicles/ID/next, a page at /."""
    uvicorn, create_app = _web_stack(limit)
    given = {"model": model and model.lower(), "area": parse_area(area), "batch_size": batch_size, "seed": seed}
    given |= {"batch_seconds": batch_seconds, "unit": unit, "close_on": close_on, "frame": parse_origin(origin)}
    config = _config(run_dir, resume, given, option)
    try:
        claim_run_directory(run_dir, "serve", reuse=True)
        app = create_app(run_dir, config, resume=resume, protect_reads=protect_reads)
    except (ValueError, TypeError) as err:  # TypeError: a model option the model does not take
        raise typer.BadParameter(str(err)) from err
    _serve(uvicorn, app, host, port)


@serve_app.command("demo")
def serve_demo(
    run_dir: Path = typer.Argument(None, help="the run directory (default: a new runs/serve-demo[-N])"),
    env: str = typer.Option("valley-ridges", "--env", help="bundled terrain the vehicles sense"),
    vehicles: int = typer.Option(2, "--vehicles", help="simulated vehicles"),
    speedup: float = typer.Option(5.0, "--speedup", help="vehicles move this many times faster than real time"),
    port: int = typer.Option(8000, "--port", help="port (on 127.0.0.1)"),
) -> None:
    """The service on a bundled terrain with simulated vehicles posting to it over HTTP: open the page and watch."""
    uvicorn, create_app = _web_stack()
    try:
        field = bundled(env)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    run_dir = run_dir or fresh_directory("runs", "serve-demo")
    config = demo_config(field)
    try:
        claim_run_directory(run_dir, "serve")
        app = create_app(run_dir, config)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    tokens = {f"vehicle{k + 1}": app.state.service.state.store.add_token(f"vehicle{k + 1}") for k in range(vehicles)}
    start_vehicles(f"http://127.0.0.1:{port}", tokens, field, config.area, speedup)
    _serve(uvicorn, app, "127.0.0.1", port)


#: seconds per unit of a token's lifetime (``--expires-in 12h``)
DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str | None) -> float | None:
    """``90s``, ``30m``, ``12h``, ``7d`` or plain seconds, in seconds (None for None); a usage error otherwise."""
    if text is None:
        return None
    number, unit = (text[:-1], text[-1]) if text[-1:].lower() in DURATION_UNITS else (text, "s")
    try:
        seconds = float(number) * DURATION_UNITS[unit.lower()]
    except ValueError:
        seconds = math.nan
    if not seconds > 0 or math.isinf(seconds):
        raise typer.BadParameter(f"--expires-in is a positive duration such as 90s, 30m, 12h or 7d, got {text!r}")
    return seconds


def _when(epoch: float | None) -> str:
    return "never" if epoch is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


@token_app.command("add")
def token_add(
    name: str = typer.Argument(..., help="the vehicle's (or watcher's) name (letters, digits, - _ .)"),
    run_dir: Path = typer.Argument(..., help="the service's run directory"),
    expires_in: str = typer.Option(None, "--expires-in", help="the token stops working after 90s, 30m, 12h, 7d, ..."),
    reads_only: bool = typer.Option(
        False, "--reads-only", help="a watcher's token: reads a service with --protect-reads, never writes"
    ),
) -> None:
    """Make a token for NAME (replacing its old one) and print it: it is shown only this once."""
    lifetime = parse_duration(expires_in)
    try:
        if run_kind(run_dir) != "serve":  # a service's directory may be in use by it: tokens go in while it runs
            claim_run_directory(run_dir, "serve", reuse=True)
        token = Store(run_dir).add_token(name, lifetime, reads_only)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    typer.echo(token)


@token_app.command("remove")
def token_remove(
    name: str = typer.Argument(..., help="the vehicle's name"),
    run_dir: Path = typer.Argument(..., help="the service's run directory"),
) -> None:
    """Revoke NAME's token: its requests get 401 from now on (a running service included)."""
    if run_kind(run_dir) != "serve" or not Store(run_dir).remove_token(name):
        raise typer.BadParameter(f"{run_dir} holds no token of a vehicle {name!r}")
    typer.echo(f"revoked the token of {name}")


@token_app.command("list")
def token_list(run_dir: Path = typer.Argument(..., help="the service's run directory")) -> None:
    """Who holds a token: name, when it was made, when it expires, whether it only reads (the tokens are not kept)."""
    if run_kind(run_dir) != "serve":
        raise typer.BadParameter(f"{run_dir} is no service's run directory")
    for name, created, holder in Store(run_dir).token_names():
        expiry = f"expired {_when(holder.expires)}" if holder.expired() else f"expires {_when(holder.expires)}"
        typer.echo(f"{name}\t{_when(created)}\t{expiry}\t{'reads only' if holder.reads_only else 'vehicle'}")
