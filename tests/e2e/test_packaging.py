"""The library apart from its experiments: what ``pip install onlinegp`` brings, what the ``cli`` extra adds, what
``import onlinegp`` loads, and what the ``onlinegp`` command says without its extra."""

import json
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

import onlinegp
from onlinegp.experiments import entry

ROOT = Path(__file__).resolve().parents[2]
SRC = Path(onlinegp.__file__).parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

#: what neither ``import onlinegp`` nor any library module may load: the command's, the plots', the optional extras'
APPLICATION_MODULES = (
    "matplotlib",
    "typer",
    "rich",
    "tqdm",
    "ray",
    "botorch",
    "pymavlink",
    "rosbags",
    "fastapi",
    "uvicorn",
    "starlette",
    "httpx",
)
#: the experiments (and ``__main__``, which starts their command, and the adapters to optional extras): every other
#: module of src/onlinegp is the library
EXPERIMENTS = ("experiments", "__main__", "botorch", "sklearn")


def name_of(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def library_modules() -> list[str]:
    names = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[0] in EXPERIMENTS:
            continue
        names.append(".".join(("onlinegp", *parts[:-1])) if parts[-1] == "__init__" else ".".join(("onlinegp", *parts)))
    return names


def test_library_dependencies_leave_out_the_command_and_plots():
    library = {name_of(r) for r in PYPROJECT["dependencies"]}
    assert {"torch", "gpytorch", "numpy", "scipy"} <= library
    assert not library & {"typer", "rich", "matplotlib", "tqdm", "ray", "botorch"}, library
    (torch,) = [r for r in PYPROJECT["dependencies"] if name_of(r) == "torch"]
    assert "==" not in torch and ">=" in torch and "<" in torch, f"torch is declared as a range, not {torch!r}"


def test_cli_extra_is_what_the_entry_point_checks_for():
    assert entry.CLI_EXTRA in PYPROJECT["optional-dependencies"]
    assert {name_of(r) for r in PYPROJECT["optional-dependencies"][entry.CLI_EXTRA]} == set(entry.CLI_MODULES)
    assert PYPROJECT["scripts"]["onlinegp"] == "onlinegp.experiments.entry:main"


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


IMPORT_PROBE = textwrap.dedent(
    """
    import importlib, json, sys

    FORBIDDEN = set(json.loads(sys.argv[1]))
    attempts = []

    class Absent:
        # the forbidden packages as a library-only install has them: not there. Records who asked for them.
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name.partition(".")[0] not in FORBIDDEN:
                return None
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename.startswith("<frozen"):
                frame = frame.f_back
            attempts.append([name, frame.f_code.co_filename if frame else "?", frame.f_lineno if frame else 0])
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    sys.meta_path.insert(0, Absent)
    report = {}
    import onlinegp
    report["import onlinegp"] = sorted(m for m in sys.modules if m.partition(".")[0] in FORBIDDEN)
    report["experiments after import onlinegp"] = sorted(m for m in sys.modules if m.startswith("onlinegp.experiments"))
    for module in json.loads(sys.argv[2]):
        importlib.import_module(module)
    report["every library module"] = sorted(m for m in sys.modules if m.partition(".")[0] in FORBIDDEN)
    report["experiments after every library module"] = sorted(
        m for m in sys.modules if m.startswith("onlinegp.experiments")
    )
    report["attempts"] = attempts
    print(json.dumps(report))
    """
)


def test_import_onlinegp_loads_no_application_dependency():
    """`import onlinegp` and every library module import without matplotlib, typer, rich, tqdm, ray, botorch,
    pymavlink or rosbags (onlinegp.vehicle_logs imports the last two when it reads a log), nor the serve extra's
    fastapi, uvicorn, starlette, httpx (onlinegp.client is urllib only), and
    none of them asks for one (torch itself tries tqdm, for torch.hub's progress bars: that is not ours); nor do they
    load any module of onlinegp.experiments."""
    modules = library_modules()
    assert {"onlinegp.models", "onlinegp.kernels", "onlinegp.posterior", "onlinegp.linalg"} <= set(modules)
    assert not any(m.startswith("onlinegp.experiments") for m in modules)
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE, json.dumps(APPLICATION_MODULES), json.dumps(modules)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["import onlinegp"] == [], report
    assert report["every library module"] == [], report
    assert report["experiments after import onlinegp"] == [], report
    assert report["experiments after every library module"] == [], report
    ours = [a for a in report["attempts"] if Path(a[1]).resolve().is_relative_to(SRC.resolve())]
    assert not ours, f"library modules import application dependencies: {ours}"


def test_the_command_loads_tqdm_only_to_draw_a_bar():
    """Importing any module of the experiments (the command's among them) asks for no tqdm: it is imported where a
    progress bar is drawn. (``import torch`` itself loads tqdm where it is installed, for torch.hub's download bars:
    not ours to change.)"""
    experiments = [
        ".".join(("onlinegp", *path.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__")
        for path in sorted((SRC / "experiments").rglob("*.py"))
    ]
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE, json.dumps(["tqdm"]), json.dumps(experiments)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    ours = [a for a in report["attempts"] if Path(a[1]).resolve().is_relative_to(SRC.resolve())]
    assert not ours, f"modules of onlinegp import tqdm on import: {ours}"
