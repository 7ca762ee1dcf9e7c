"""``KEY=VALUE`` options from the command line (``--option``) as keyword arguments, the same for every command."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable
from typing import Any


def parse_value(text: str) -> Any:
    """A Python literal (``0.005``, ``None``, ``(1, 2)``, ``{"ard": False}``), else JSON (``{"ard": false}``,
    ``null``); ``none`` is None too; anything else is kept as the string (``vips``)."""
    text = text.strip()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, RecursionError):
        pass
    try:
        return json.loads(text)
    except ValueError:
        return None if text.lower() == "none" else text


def parse_options(items: Iterable[str] | None) -> dict[str, Any]:
    """``["sketch=None", "lr=0.005", "inducing=vips"]`` → ``{"sketch": None, "lr": 0.005, "inducing": "vips"}``
    (values by :func:`parse_value`; a later item overrides an earlier one). ValueError for an item that is not
    ``KEY=VALUE`` with KEY a Python identifier."""
    options = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ValueError(f"--option expects KEY=VALUE with KEY a constructor argument, got {item!r}")
        options[key] = parse_value(value)
    return options


def model_options(items: Iterable[str] | None) -> dict[str, Any]:
    """A model's ``--option`` items (:func:`parse_options`), a deprecated flat training keyword among them
    (:data:`~onlinegp.training.LEGACY_TRAINING`: ``fit_steps=5``) warning (FutureWarning) with the spelling that
    replaces it (``training={'steps': 5}``)."""
    from .training import warn_legacy  # torch: not for the other commands' options

    options = parse_options(items)
    warn_legacy(options, stacklevel=3)
    return options
