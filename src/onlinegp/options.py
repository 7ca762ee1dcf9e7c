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
