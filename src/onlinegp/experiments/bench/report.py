"""``onlinegp bench report``: the tables of the results pages, rendered again from the kept runs alone.

A page marks each generated table with the command that makes it, the file of that command's output it shows and
the package version whose kept runs it reads::

    <!-- report: onlinegp bench vips-table1 --datasets concrete,skillcraft --splits 5 | table.md | 0.1.0 -->
    ...the table...
    <!-- /report -->

:func:`render` runs each command with ``--kept-only VERSION``
(:attr:`~onlinegp.experiments.bench.runner.RunnerOptions.kept_only`: nothing runs, every run must be kept for that
version, else :class:`~onlinegp.experiments.bench.runner.NotKept` names the missing ones) into a scratch directory,
through the runner of command lines it is given (the CLI's :func:`~onlinegp.experiments.cli.invoke`), and puts the
named file between the markers. ``--check`` compares instead of writing, so a test fails
when a page no longer equals its regeneration; the prose around a block names the data and is written by hand.
"""

from __future__ import annotations

import re
import shlex
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import typer

#: runs one ``onlinegp`` command line: the words that follow ``onlinegp``
Invoke = Callable[[list[str]], object]

BLOCK = re.compile(
    r"(?P<open><!-- report: (?P<command>[^|]+?) \| (?P<file>[^|]+?) \| (?P<version>[^ ]+?) -->\n)"
    r"(?P<body>.*?)"
    r"(?P<close><!-- /report -->)",
    re.S,
)


@dataclass
class Block:
    """One generated block of a page."""

    page: Path
    command: str
    file: str
    version: str
    body: str


def _block(page: Path, match: re.Match) -> Block:
    return Block(page, match["command"].strip(), match["file"].strip(), match["version"], match["body"])


def blocks(page: Path) -> list[Block]:
    """The generated blocks of ``page``, in order."""
    return [_block(page, m) for m in BLOCK.finditer(page.read_text())]


def regenerate(block: Block, results: Path, invoke: Invoke) -> str:
    """The block's file as its command, run by ``invoke``, writes it now, from the runs of the block's version kept in
    ``results``."""
    words = shlex.split(block.command)
    if len(words) < 3 or words[:2] != ["onlinegp", "bench"] or words[2] in ("report", "verify"):
        raise ValueError(
            f"{block.page.name}: a report block runs an `onlinegp bench NAME ...` sweep, got {block.command!r}"
        )
    if any(w in ("--out", "--results", "--no-results", "--fresh", "--kept-only") for w in words):
        raise ValueError(
            f"{block.page.name}: a report block chooses no --out/--results/--fresh/--kept-only ({block.command!r})"
        )
    with tempfile.TemporaryDirectory(prefix="onlinegp-report-") as out:
        try:
            invoke([*words[1:], "--out", out, "--results", str(results), "--quiet", "--kept-only", block.version])
        except typer.BadParameter as err:
            raise ValueError(f"{block.page.name}: `{block.command}`: {err.message}") from err
        text = (Path(out) / block.file).read_text()
    return text if text.endswith("\n") else text + "\n"


def render(
    pages: Sequence[Path], results: Path, invoke: Invoke, check: bool = False, echo: Callable[[str], None] = print
) -> list[Path]:
    """Regenerate every block of ``pages`` from the results tree ``results``, each command run by ``invoke``; write the
    pages that changed, or with ``check`` only list them. Returns the pages that differ(ed) from their regeneration."""
    changed = []
    for page in pages:
        text = page.read_text()

        def fill(match: re.Match, page: Path = page) -> str:
            block = _block(page, match)
            body = regenerate(block, results, invoke)
            state = "ok" if body == block.body else "differs"
            echo(f"{state:8s}{page.name}: {block.command} | {block.file} | {block.version}")
            return match["open"] + body + match["close"]

        new = BLOCK.sub(fill, text)
        if new != text:
            changed.append(page)
            if not check:
                page.write_text(new)
    return changed


def default_pages(root: Path) -> list[Path]:
    """The results pages and the README of the checkout at ``root``."""
    return sorted((root / "docs" / "results").glob("*.md")) + [root / "README.md"]
