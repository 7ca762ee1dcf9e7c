"""Every command's ``--help`` keeps its content: for each command and sub-command of the app, its help, its options
(flags, metavar, help text, default as shown) and arguments, and a group's commands, as the committed snapshot
cli_help.json holds them. After a change meant to alter a help, rewrite the snapshot with
``ONLINEGP_UPDATE_HELP=1 pytest tests/experiments/test_cli_help.py`` and review its diff."""

import json
import os
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from onlinegp.experiments.cli import app

SNAPSHOT = Path(__file__).with_name("cli_help.json")
WIDTH = 200
#: the environment a help is read in: a fixed width, and no variable whose value a help would show as a default
ENV = {"COLUMNS": str(WIDTH), "ONLINEGP_RESULTS": None, "ONLINEGP_TOKEN": None, "NO_COLOR": "1"}
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
DEFAULT = re.compile(r"\[default: ([^\]]*)\]")


def command_paths(command, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The words of every command and sub-command under *command* (a typer click command, itself included), sorted."""
    found = [path]
    if hasattr(command, "commands"):
        for name in sorted(command.commands):
            found += command_paths(command.commands[name], (*path, name))
    return found


def panels(text: str) -> dict[str, list[str]]:
    """A help's boxed panels, by title: each panel's lines, its borders taken off."""
    found: dict[str, list[str]] = {}
    title = None
    for line in text.splitlines():
        if line.startswith("╭─"):
            title = line.strip("╭─╮ ").split(" ─")[0].strip()
            found[title] = []
        elif line.startswith("╰"):
            title = None
        elif title is not None:
            found[title].append(line.strip().removeprefix("│").removesuffix("│").rstrip())
    return found


def rows(lines: list[str]) -> list[dict]:
    """A panel's rows: its names (flags, or an argument's or command's name), metavar, help and default as shown;
    a line indented to the help column of the row above continues that row's help."""
    found: list[dict] = []
    help_column = None
    for line in lines:
        indent = len(line) - len(line.lstrip())
        required = line.strip().startswith("*")
        cells = [c for c in re.split(r"\s{2,}", line.strip().removeprefix("*").strip()) if c]
        if not cells:
            continue
        if found and help_column is not None and indent >= help_column:
            found[-1]["help"] += " " + " ".join(cells)
            continue
        names = [cells.pop(0)]
        while cells and cells[0].startswith("-"):
            names.append(cells.pop(0))
        metavar = re.match(r"<[^>]*>", cells[0]) if cells else None
        if metavar:
            cells[0] = cells[0][metavar.end() :].strip()
            cells = [c for c in cells if c]
        help_column = line.rindex(cells[0]) if cells else None
        found.append(
            {
                "names": names,
                "required": required,
                "metavar": metavar.group(0) if metavar else "",
                "help": " ".join(cells),
            }
        )
    for row in found:
        row["help"] = " ".join(row["help"].split())
        default = DEFAULT.search(row["help"])
        row["default"] = default.group(1) if default else None
        row["help"] = DEFAULT.sub("", row["help"]).strip()
    return found


def read_help(path: tuple[str, ...]) -> dict:
    """The content of ``onlinegp PATH --help``: its description (text above the panels) and its panels' rows by the
    row's first name."""
    result = CliRunner().invoke(app, [*path, "--help"], env=ENV, terminal_width=WIDTH)
    assert result.exit_code == 0, result.output
    text = ANSI.sub("", result.output)
    intro = text.split("╭")[0].splitlines()
    description = " ".join(" ".join(line.split()) for line in intro if not line.strip().startswith("Usage:"))
    return {
        "description": " ".join(description.split()),
        "panels": {title: {r["names"][0]: r for r in rows(lines)} for title, lines in panels(text).items()},
    }


def hidden_options(path: tuple[str, ...]) -> list[str]:
    """The hidden options of the command at *path*: not in its help, but part of what it takes."""
    command = typer.main.get_command(app)
    for word in path:
        command = command.commands[word]
    return sorted(p.opts[0] for p in command.params if p.param_type_name == "option" and p.hidden)


def every_help() -> dict[str, dict]:
    """Every command's help content, by its words."""
    return {
        " ".join(path): {**read_help(path), "hidden": hidden_options(path)}
        for path in command_paths(typer.main.get_command(app))
    }


def test_the_help_parser_reads_a_row_its_continuation_and_its_default():
    row = " *  --seeds  -s  <str>  seeds, e.g. 0-4"
    lines = [row, " " * row.index("seeds,") + "or 0,3 [default: 0-4]", "    --quiet      <bool>  q"]
    assert rows(lines) == [
        {
            "names": ["--seeds", "-s"],
            "required": True,
            "metavar": "<str>",
            "help": "seeds, e.g. 0-4 or 0,3",
            "default": "0-4",
        },
        {"names": ["--quiet"], "required": False, "metavar": "<bool>", "help": "q", "default": None},
    ]


def test_every_help_is_as_the_snapshot():
    helps = every_help()
    if os.environ.get("ONLINEGP_UPDATE_HELP"):
        SNAPSHOT.write_text(json.dumps(helps, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
        pytest.skip(f"rewrote {SNAPSHOT.name}")
    snapshot = json.loads(SNAPSHOT.read_text())
    assert helps.keys() == snapshot.keys()
    for path, help_ in helps.items():
        assert help_ == snapshot[path], f"onlinegp {path} --help differs from {SNAPSHOT.name}"
