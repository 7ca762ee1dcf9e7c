"""Options of a command declared once, as the fields of the dataclass they fill in (a bench's options,
:class:`~onlinegp.experiments.simulator.mission.MissionConfig`).

A field made by :func:`option` is also an option of the command built from its dataclass, its help, flag and
parsing in the field's metadata; a field made by :func:`gathered` is a dict whose options are the fields of another
such dataclass, the ones given gathered into the dict (a mission's ``--extent`` ... ``--values`` into its
``field_options``). :func:`declared` lists a dataclass's options, gathered ones in place, and :func:`from_settings`
turns the settings of a command (by field name, None meaning unset) back into the dataclass's keyword arguments. The
command line itself (typer) reads them in :func:`onlinegp.experiments.cli.declared_options`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any


def option(
    default: Any,
    help: str | None,
    flag: str = "",
    cli_type: type | None = None,
    parse: Callable[[str], Any] | None = None,
    show_default: bool = True,
) -> Any:
    """A field of an options dataclass that is also an option of its command, its default *default*.

    The field's metadata holds the option: ``help``, ``flag`` (default ``--NAME``, underscores as dashes; a bool's may
    be ``--on/--off``), ``cli_type`` (what the command reads; default the default's type, the field's annotation
    without None for a None default, and ``str`` for a tuple, shown and read as comma-joined text), ``parse`` (text to
    the field's value, raising ValueError on bad text; default: the text itself) and ``show_default`` (False: the
    help shows no default, its text says what it is). A field without this metadata is an option of the Python API
    alone.
    """
    metadata = {"help": help, "flag": flag, "cli_type": cli_type, "parse": parse, "show_default": show_default}
    return dataclasses.field(default=default, metadata=metadata)


def gathered(options: type, default: Any = None, default_factory: Any = dataclasses.MISSING) -> Any:
    """A dict field whose command's options are the :func:`option` fields of the dataclass *options*: those given
    (not None) are gathered into the dict, by name; none given leaves the field's default (*default*, or
    *default_factory*'s value)."""
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata={"gathers": options})
    return dataclasses.field(default=default, metadata={"gathers": options})


def declared(cls: type) -> Iterator[tuple[type, dataclasses.Field]]:
    """Every option of the dataclass *cls* as ``(the dataclass declaring it, its field)``, in field order: a
    :func:`gathered` field's options in its place."""
    for field in dataclasses.fields(cls):
        if "gathers" in field.metadata:
            yield from declared(field.metadata["gathers"])
        elif "help" in field.metadata:
            yield cls, field


def cli_type(cls: type, field: dataclasses.Field) -> type:
    """The type the command reads for *field* of *cls* (:func:`option`): its ``cli_type``, else its default's type
    (``str`` for a tuple), else, for a None default, the field's annotation without None."""
    if field.metadata["cli_type"] is not None:
        return field.metadata["cli_type"]
    if isinstance(field.default, tuple):
        return str
    if field.default is not None:
        return type(field.default)
    annotation = typing.get_type_hints(cls)[field.name]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(kinds) == 1:
            return kinds[0]
    if isinstance(annotation, type):
        return annotation
    raise TypeError(f"{cls.__name__}.{field.name}: give the option's cli_type (its annotation is {annotation})")


def from_settings(cls: type, settings: dict[str, Any], **given: Any) -> dict[str, Any]:
    """The keyword arguments of the dataclass *cls* from a command's *settings* by field name (the options of
    :func:`declared`, or any other field of *cls*), None meaning unset (the field's default): a :func:`gathered`
    field takes its options given, after its value in *given* (a dict: ``model_options`` parsed from ``--option``).
    A setting that is no option or field of *cls* is a TypeError."""
    settings = {k: v for k, v in settings.items() if v is not None}
    kwargs = {k: v for k, v in given.items() if v is not None}
    for field in dataclasses.fields(cls):
        if "gathers" in field.metadata:
            own = {f.name: settings.pop(f.name) for _, f in declared(field.metadata["gathers"]) if f.name in settings}
            value = {**(kwargs.pop(field.name, None) or {}), **own}
            if value:
                kwargs[field.name] = value
        elif field.name in settings:
            kwargs[field.name] = settings.pop(field.name)
    if settings:
        raise TypeError(f"{cls.__name__} takes no setting(s) {', '.join(sorted(settings))}")
    return kwargs
