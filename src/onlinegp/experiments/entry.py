"""The ``onlinegp`` console command's entry point: the command-line interface when the ``cli`` extra is installed,
else a line saying how to install it (in place of an ImportError's traceback).

The library (``pip install onlinegp``) does not need typer, rich, matplotlib or tqdm; the command, the simulator,
the benches and the plots do, and the ``cli`` extra brings them.
"""

from __future__ import annotations

import importlib.util
import sys

#: the extra that brings the command's dependencies, and the modules it brings (pyproject.toml's ``cli`` extra)
CLI_EXTRA = "cli"
CLI_MODULES = ("typer", "rich", "matplotlib", "tqdm")


def missing_modules() -> list[str]:
    """The modules of the ``cli`` extra that are not installed (none are imported to find out)."""
    return [name for name in CLI_MODULES if importlib.util.find_spec(name) is None]


def main() -> None:
    """Run the ``onlinegp`` command, or say which extra to install and exit with status 1."""
    missing = missing_modules()
    if missing:
        print(
            f"onlinegp: the onlinegp command needs the {CLI_EXTRA!r} extra ({', '.join(missing)} not installed); "
            f'install it with: pip install "onlinegp[{CLI_EXTRA}]"',
            file=sys.stderr,
        )
        raise SystemExit(1)
    from .cli import app

    app()
