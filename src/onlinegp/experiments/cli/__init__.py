"""The ``onlinegp`` command. Sub-commands live next to the code they run and are registered here: missions
(:mod:`.mission`), streams and replays (:mod:`.data`), benches (:mod:`.bench`), the service (``serve``)."""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import typer

from ... import __version__, portable
from ...io import claim_run_directory
from ...models.registry import MODELS
from ...options import model_options, parse_options
from ..flags import cli_type, declared
from ..service.cli import serve_app

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


def declared_options(options: type) -> Options:
    """The options of a command that the dataclass *options* declares (name: (type, ``typer.Option``)), in its fields'
    order, a :func:`~onlinegp.experiments.flags.gathered` field's in its place: each field's metadata
    (:func:`~onlinegp.experiments.flags.option`) gives its flag, help, type
    (:func:`~onlinegp.experiments.flags.cli_type`) and parsing, a tuple default shown as comma-joined text."""
    found: Options = {}
    for owner, field in declared(options):
        meta, default = field.metadata, field.default
        text = ",".join(map(str, default)) if isinstance(default, tuple) else default
        flag = meta["flag"] or "--" + field.name.replace("_", "-")
        callback = None if meta["parse"] is None else _usage_errors(meta["parse"])
        shown = {} if meta["show_default"] else {"show_default": False}
        typed = cli_type(owner, field)
        found[field.name] = (typed, typer.Option(text, flag, help=meta["help"], callback=callback, **shown))
    return found


def _usage_errors(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An option's callback that reads its text with *parse*, a ValueError a usage error."""

    def callback(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as err:
            raise typer.BadParameter(str(err)) from err

    return callback


def parse_model_options(items: list[str] | None) -> dict:
    """Every command's ``--option KEY=VALUE`` items as model keyword arguments (:func:`onlinegp.options.parse_value`
    reads the values: ``sketch=None``, ``lr=0.005``, ``inducing=vips``); a malformed item is a usage error, a
    deprecated flat training keyword a FutureWarning (:func:`onlinegp.options.model_options`)."""
    try:
        return model_options(items)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err


def blame_options(
    build: Callable[[dict], object], items: Sequence[str], options: dict, err: Exception | None = None
) -> str | None:
    """What is wrong with the ``--option`` *items* when ``build(options)`` makes the model (*options*: the items' and
    any others): None when it builds; else each item the model refuses on its own, with its reason, else all of them
    with the model's error (*err*, when already caught); that error alone when the model fails without the items."""
    parsed = {item: parse_options([item]) for item in items}
    base = {k: v for k, v in options.items() if not any(k in p for p in parsed.values())}

    def failure(extra: dict) -> Exception | None:
        try:
            build({**base, **extra})
        except (ValueError, TypeError) as reason:
            return reason
        return None

    err = err or failure({k: v for p in parsed.values() for k, v in p.items()})
    if err is None:
        return None
    if not parsed or failure({}) is not None:
        return str(err)
    bad = {item: reason for item, p in parsed.items() if (reason := failure(p)) is not None}
    if not bad:
        return ", ".join(f"--option {item}" for item in parsed) + f": {err}"
    return "; ".join(f"--option {item}: {reason}" for item, reason in bad.items())


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


def invoke(words: Sequence[str]) -> None:
    """Run one ``onlinegp`` command line (``words``: what follows ``onlinegp``) in this process, its errors raised
    rather than printed (how ``bench report`` runs the command of each block)."""
    app(list(words), standalone_mode=False)


from . import bench, data, mission  # noqa: E402, F401 - each registers its commands on the app
