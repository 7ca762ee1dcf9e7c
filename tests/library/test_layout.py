"""The package's layout: the library apart from its experiments (onlinegp.experiments), every model at the root, the
registry a leaf, no import circle (imports inside functions count), no import inside a model's functions, no function
over :data:`MAX_FUNCTION_LINES` lines; and the tests' own tree, which mirrors the source's
(:func:`layout_problems_of_tests`)."""

import ast
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

import onlinegp

SRC = Path(onlinegp.__file__).parent
TESTS = Path(__file__).resolve().parents[1]
#: what tests/ itself may hold besides its subtrees: the package marker, the shared fixtures, the shared oracles
TESTS_TOP_LEVEL = {"__init__.py", "conftest.py", "reference.py"}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


EXPERIMENTS = "onlinegp.experiments"


def imported_names(
    source: str, module: str, is_package: bool = False, run_only: bool = False
) -> list[tuple[int, str, bool]]:
    """Every module (or package member) that ``source``, the text of ``module``, imports, at any depth (inside
    functions too), relative imports resolved: ``(line, dotted name, inside a function)``. ``run_only`` leaves out
    the imports only a type checker reads (under ``if TYPE_CHECKING:``)."""
    package = module if is_package else module.rpartition(".")[0]
    found = []

    def visit(node: ast.AST, deferred: bool) -> None:
        if run_only and isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            for child in node.orelse:
                visit(child, deferred)
            return
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, deferred) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.append((node.lineno, base, deferred))
            found.extend((node.lineno, f"{base}.{alias.name}", deferred) for alias in node.names)
        deferred = deferred or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for child in ast.iter_child_nodes(node):
            visit(child, deferred)

    visit(ast.parse(source), False)
    return found


def experiments_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    """The imports of ``onlinegp.experiments`` in ``source``: one ``line N: name`` per import statement."""
    hits: dict[int, str] = {}
    for line, name, _ in imported_names(source, module, is_package):
        if (name == EXPERIMENTS or name.startswith(EXPERIMENTS + ".")) and line not in hits:
            hits[line] = name
    return [f"line {line}: {name}" for line, name in hits.items()]


def library_files() -> list[Path]:
    """The library's modules: all of src/onlinegp but the experiments and ``__main__`` (which starts their command)."""
    return [
        p
        for p in sorted(SRC.rglob("*.py"))
        if p.relative_to(SRC).parts[0] != "experiments" and p.relative_to(SRC) != Path("__main__.py")
    ]


def test_layout_check_sees_every_form_of_import():
    relative = "def f():\n    from ..experiments.simulator import fields\n"
    assert experiments_imports(relative, "onlinegp.data.sources") == ["line 2: onlinegp.experiments.simulator"]
    assert experiments_imports("from . import experiments\n", "onlinegp.base") == ["line 1: onlinegp.experiments"]
    assert experiments_imports("from .experiments import cli\n", "onlinegp", is_package=True)
    assert experiments_imports("import onlinegp.experiments.cli\n", "onlinegp.base")
    assert experiments_imports("from onlinegp.experiments.bench import runner\n", "onlinegp.io")
    assert not experiments_imports("from . import metrics\nfrom .tables import read_table\n", "onlinegp.data.sources")


def test_library_never_imports_the_experiments():
    """The library (everything in src/onlinegp outside onlinegp/experiments/) imports nothing from the experiments:
    not at module level, not inside functions, neither relatively nor absolutely."""
    files = library_files()
    assert {"base.py", "posterior.py", "tables.py"} <= {p.name for p in files}
    assert not any("experiments" in p.relative_to(SRC).parts for p in files)
    found = {}
    for path in files:
        hits = experiments_imports(path.read_text(), module_name(path), path.name == "__init__.py")
        if hits:
            found[str(path.relative_to(SRC))] = hits
    assert not found, f"library modules import onlinegp.experiments: {found}"


def test_experiments_are_one_subpackage():
    """The application code lives in onlinegp/experiments/, not among the library's top-level modules."""
    top = {p.stem for p in SRC.glob("*.py")} | {p.name for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    moved = {"cli", "entry", "bench", "rig", "simulator", "stream", "replay", "plots"}
    assert not top & moved, top & moved
    for name in ("entry", "stream", "replay", "plots", "bench/runner", "simulator/mission"):
        assert (SRC / "experiments" / f"{name}.py").is_file(), name
    assert (SRC / "experiments" / "cli" / "__init__.py").is_file()


MAX_FUNCTION_LINES = 100
#: functions of src/onlinegp allowed over MAX_FUNCTION_LINES lines, by qualified name, each with its reason
LONG_FUNCTIONS: dict[str, str] = {}


def function_lines(source: str, module: str) -> dict[str, int]:
    """Every function and method in ``source``, the text of ``module``, nested ones too, by qualified name
    (``module.Class.method``, ``module.function.inner``): its lines from ``def`` to its last, decorators aside."""
    found = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}.{child.name}"
                if not isinstance(child, ast.ClassDef):
                    found[name] = child.end_lineno - child.lineno + 1
                visit(child, name)
            else:
                visit(child, prefix)

    visit(ast.parse(source), module)
    return found


def test_function_lines_sees_methods_and_nested_functions():
    source = "class A:\n    @property\n    def f(self):\n        def g():\n            pass\n        return 1\n"
    assert function_lines(source, "m") == {"m.A.f": 4, "m.A.f.g": 2}
    assert function_lines("if True:\n    async def h():\n        pass\n", "m") == {"m.h": 2}


def test_no_function_is_over_100_lines():
    """Each function in src/onlinegp fits in MAX_FUNCTION_LINES lines (more wants named steps), but those named in
    LONG_FUNCTIONS with their reason; an entry that is no longer long goes."""
    lines = {}
    for path in sorted(SRC.rglob("*.py")):
        lines |= function_lines(path.read_text(), module_name(path))
    long = {name: n for name, n in lines.items() if n > MAX_FUNCTION_LINES}
    assert long.keys() <= LONG_FUNCTIONS.keys(), f"functions over {MAX_FUNCTION_LINES} lines: {long}"
    assert long.keys() == LONG_FUNCTIONS.keys(), (
        f"no longer over {MAX_FUNCTION_LINES} lines: {LONG_FUNCTIONS.keys() - long.keys()}"
    )


MAX_COMMAND_LINES = 60


def test_no_command_function_is_over_60_lines():
    """The CLI is a thin layer over the runs and benches: every command function of experiments/cli/ (a decorated
    function; a bench's command is built from its options dataclass) fits in MAX_COMMAND_LINES lines; its steps are
    named helpers."""
    commands = {
        f"{path.stem}.{node.name}": node.end_lineno - node.lineno + 1
        for path in sorted((SRC / "experiments" / "cli").glob("*.py"))
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.FunctionDef) and node.decorator_list
    }
    assert len(commands) >= 7, f"the check no longer sees the commands: {sorted(commands)}"
    long = {name: n for name, n in commands.items() if n > MAX_COMMAND_LINES}
    assert not long, f"command functions over {MAX_COMMAND_LINES} lines: {long}"


def package_sources() -> dict[str, tuple[str, bool]]:
    """Every module of src/onlinegp by dotted name: its text, and whether it is a package's ``__init__``."""
    return {module_name(p): (p.read_text(), p.name == "__init__.py") for p in sorted(SRC.rglob("*.py"))}


def import_graph(sources: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """The modules of ``sources`` (as :func:`package_sources` gives them) that each one imports when it runs, at
    module level or inside a function: ``from package import module`` imports both, and importing ``a.b.c`` runs the
    packages ``a`` and ``a.b`` first; an import only a type checker reads does not count, nor does a module's import
    of a package it lies in (loaded before it)."""
    graph = {}
    for name, (source, is_package) in sources.items():
        targets = {t for _, t, _ in imported_names(source, name, is_package, run_only=True)}
        packages = {t.rsplit(".", n)[0] for t in targets for n in range(1, t.count(".") + 1)}
        graph[name] = {t for t in targets | packages if t in sources and t != name and not name.startswith(t + ".")}
    return graph


def import_circle(graph: dict[str, set[str]]) -> list[str]:
    """A circle of imports in ``graph`` (each module's imports), as ``[a, b, ..., a]``; empty when there is none."""
    state: dict[str, int] = {}  # 1: on the current trail, 2: done

    def visit(node: str, trail: list[str]) -> list[str]:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return trail[trail.index(nxt) :] + [nxt]
            circle = [] if nxt in state else visit(nxt, trail + [nxt])
            if circle:
                return circle
        state[node] = 2
        return []

    for name in sorted(graph):
        circle = [] if name in state else visit(name, [name])
        if circle:
            return circle
    return []


def test_import_check_sees_a_circle_closed_inside_a_function():
    sources = {
        "onlinegp": ("", True),
        "onlinegp.a": ("def f():\n    from . import b\n", False),
        "onlinegp.b": ("from .a import f\n", False),
    }
    assert import_circle(import_graph(sources)) == ["onlinegp.a", "onlinegp.b", "onlinegp.a"]
    sources["onlinegp.b"] = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n", False)
    assert import_circle(import_graph(sources)) == []
    sources["onlinegp.sub"] = ("from .. import a\n", True)
    sources["onlinegp.b"] = ("import onlinegp.sub\n", False)
    assert import_graph(sources)["onlinegp.a"] == {"onlinegp.b"}
    assert import_circle(import_graph(sources)) == ["onlinegp.a", "onlinegp.b", "onlinegp.sub", "onlinegp.a"]
    sources["onlinegp.b"] = ("def plot():\n    import matplotlib.pyplot\n", False)  # a third-party module
    assert import_graph(sources)["onlinegp.b"] == set() and import_circle(import_graph(sources)) == []


def test_no_import_cycle_between_modules():
    """No module of src/onlinegp imports itself through others, counting the imports inside functions: a deferred
    import may keep a command's start fast or an optional dependency optional, never close a circle."""
    graph = import_graph(package_sources())
    assert {"onlinegp.base", "onlinegp.experiments.cli"} <= graph.keys()
    assert "onlinegp.experiments.bench.runner" in graph["onlinegp.experiments.cli.bench"]  # seen inside a function
    circle = import_circle(graph)
    assert not circle, "import circle: " + " -> ".join(circle)


def test_models_import_nothing_inside_functions():
    models = {
        n: text for n, text in package_sources().items() if n == "onlinegp.models" or n.startswith("onlinegp.models.")
    }
    assert {"onlinegp.models", "onlinegp.models.registry"} <= models.keys()
    for name, (source, is_package) in models.items():
        deferred = [
            f"line {line}: {target}"
            for line, target, inside in imported_names(source, name, is_package, run_only=True)
            if inside and target.startswith("onlinegp")
        ]
        assert not deferred, f"{name} imports inside functions: {deferred}"


def test_every_registered_class_is_exported_at_the_root():
    for name, entry in onlinegp.MODELS.items():
        cls = getattr(entry.factory, "func", entry.factory)
        assert getattr(onlinegp, cls.__name__) is cls, name
        assert cls.__name__ in onlinegp.__all__


def test_failed_first_update_leaves_the_model_without_an_input_width():
    model = onlinegp.POAM(num_inducing=10, kernel="rbf", training=onlinegp.Training(steps=1))
    before = model.state_dict()

    def boom(*args):
        raise RuntimeError("simulated failure")

    model._update = boom
    with pytest.raises(RuntimeError, match="simulated"):
        model.update(torch.rand(20, 3), torch.rand(20))
    del model._update
    assert model.input_dim is None and not hasattr(model, "kernel")
    assert model.state_dict().keys() == before.keys()
    report = model.update(torch.rand(20, 2, dtype=torch.float64), torch.rand(20, dtype=torch.float64))
    assert model.input_dim == 2 and report.num_data == 20


def test_make_extras_keeps_the_editable_install():
    """`make extras EXTRAS=geotiff` installs an extra into make's .venv without replacing the editable install."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    root = Path(__file__).resolve().parents[2]
    dry = subprocess.run(["make", "-n", "-C", str(root), "extras", "EXTRAS=geotiff"], capture_output=True, text=True)
    assert dry.returncode == 0 and 'pip install -q -e ".[geotiff]"' in dry.stdout, dry.stdout + dry.stderr


def layout_problems_of_tests(tests: Path, src: Path = SRC) -> list[str]:
    """What breaks the tests' layout under ``tests``: a Python file directly in it other than :data:`TESTS_TOP_LEVEL`
    (a test belongs in library/, experiments/ or e2e/), a folder other than those three, a folder of library/ or
    experiments/ that is no package of the source it mirrors (``src``: onlinegp's folder), and a folder holding Python
    files without ``__init__.py`` (test files may share a basename only inside packages)."""
    subtrees = {"library": src, "experiments": src / "experiments", "e2e": None}  # each one's mirror (e2e/: none)
    problems = []
    for path in sorted(tests.iterdir()):
        if path.name.startswith(".") or path.name == "__pycache__":
            continue
        if path.is_dir() and path.name not in subtrees:
            problems.append(f"{path.name}/: not one of {', '.join(f'{name}/' for name in subtrees)}")
        elif path.is_file() and path.suffix == ".py" and path.name not in TESTS_TOP_LEVEL:
            problems.append(f"{path.name}: a test file directly in tests/ (move it to library/, experiments/ or e2e/)")
    folders = [tests, *(p for p in tests.rglob("*") if p.is_dir() and "__pycache__" not in p.parts)]
    for folder in sorted(folders):
        relative = folder.relative_to(tests)
        if any(folder.glob("*.py")) and not (folder / "__init__.py").is_file():
            problems.append(f"{relative.as_posix()}/: no __init__.py")
        if len(relative.parts) < 2 or subtrees.get(relative.parts[0]) is None:
            continue
        mirrored = subtrees[relative.parts[0]].joinpath(*relative.parts[1:])
        if not (mirrored / "__init__.py").is_file() or mirrored == src / "experiments":
            problems.append(f"{relative.as_posix()}/: mirrors no package of the source ({mirrored} is none)")
    return problems


def test_tests_mirror_the_source_tree():
    assert layout_problems_of_tests(TESTS) == []
    assert {p.name for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__"} == {
        "library",
        "experiments",
        "e2e",
    }


def test_tests_tree_check_sees_each_problem(tmp_path):
    tests = tmp_path / "tests"
    for folder in ("", "library", "library/models", "experiments", "experiments/bench", "e2e"):
        (tests / folder).mkdir(parents=True, exist_ok=True)
        (tests / folder / "__init__.py").touch()
    (tests / "conftest.py").touch()
    (tests / "library" / "models" / "test_poam.py").touch()
    assert layout_problems_of_tests(tests) == []
    (tests / "test_new.py").touch()
    (tests / "e2e" / "scripts").mkdir()
    (tests / "e2e" / "scripts" / "helper.py").touch()
    (tests / "library" / "nowhere").mkdir()
    (tests / "library" / "experiments").mkdir()
    (tests / "integration").mkdir()
    problems = layout_problems_of_tests(tests)
    assert [p.split(":")[0] for p in problems] == [
        "integration/",
        "test_new.py",
        "e2e/scripts/",
        "library/experiments/",
        "library/nowhere/",
    ], problems
