"""The library apart from its experiments: what ``pip install onlinegp`` brings, what the ``cli`` extra adds, what
``import onlinegp`` loads, and what the ``onlinegp`` command says without its extra."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import onlinegp
from onlinegp import entry

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def name_of(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_library_dependencies_leave_out_the_command_and_plots():
    library = {name_of(r) for r in PYPROJECT["dependencies"]}
    assert {"torch", "gpytorch", "numpy", "scipy"} <= library
    assert not library & {"typer", "rich", "matplotlib", "tqdm", "ray", "botorch"}, library
    (torch,) = [r for r in PYPROJECT["dependencies"] if name_of(r) == "torch"]
    assert "==" not in torch and ">=" in torch and "<" in torch, f"torch is declared as a range, not {torch!r}"


def test_cli_extra_is_what_the_entry_point_checks_for():
    assert entry.CLI_EXTRA in PYPROJECT["optional-dependencies"]
    assert {name_of(r) for r in PYPROJECT["optional-dependencies"][entry.CLI_EXTRA]} == set(entry.CLI_MODULES)
    assert PYPROJECT["scripts"]["onlinegp"] == "onlinegp.entry:main"


def test_requirements_pin_every_declared_dependency():
    """requirements.txt keeps the exact versions `make install` installs: the library's, the cli and test extras'
    (torch is installed before it, by the Makefile; other extras go in with `make extras`)."""
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            assert "==" in line, f"requirements.txt pins exact versions: {line!r}"
            pins[name_of(line)] = line
    declared = {name_of(r) for r in PYPROJECT["dependencies"]}
    for extra in (entry.CLI_EXTRA, "test"):
        declared |= {name_of(r) for r in PYPROJECT["optional-dependencies"][extra]}
    assert declared - {"torch"} <= pins.keys(), declared - {"torch"} - pins.keys()
    assert "torch==2.13.0" in (ROOT / "Makefile").read_text()


def test_command_without_its_extra_says_which_extra_to_install(monkeypatch, capsys):
    monkeypatch.setattr(entry, "missing_modules", lambda: ["typer", "matplotlib"])
    with pytest.raises(SystemExit) as exit_:
        entry.main()
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert 'pip install "onlinegp[cli]"' in err and "typer, matplotlib" in err and "Traceback" not in err


def test_command_with_its_extra_runs_the_cli(monkeypatch, capsys):
    assert entry.missing_modules() == []  # the test environment has the cli extra
    monkeypatch.setattr(sys, "argv", ["onlinegp", "--version"])
    with pytest.raises(SystemExit) as exit_:
        entry.main()
    assert exit_.value.code in (0, None)
    assert capsys.readouterr().out.strip() == f"onlinegp {onlinegp.__version__}"


def test_command_without_its_extra_in_a_fresh_interpreter():
    """What a library-only install prints: typer hidden from the interpreter, no traceback."""
    code = "import sys; sys.modules['typer'] = None; sys.argv = ['onlinegp', 'mission']; import runpy; "
    code += "runpy.run_module('onlinegp', run_name='__main__')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert 'pip install "onlinegp[cli]"' in done.stderr and "Traceback" not in done.stderr, done.stderr
