"""Every `onlinegp ...` command line of the README's ```bash blocks runs and exits 0, with small budgets.

tests/e2e/test_readme.py checks that each line names a real sub-command with real options; this module runs them,
in README order and in one working directory (so `--resume`/`--force --out runs/mission/...` and `replay
runs/mission/.../survey.npz` find the run an earlier line made), through typer's CliRunner in this process.
The user files the README refers to (my_dem.npz, my_log.csv, my.csv) are written first. Budgets are cut by
REWRITES (below) so that the whole module takes a minute or two; the lines are otherwise as the README has them.
"""

import re
import shlex

import numpy as np
import pytest
from typer.testing import CliRunner

from onlinegp.experiments.cli import app
from tests.e2e.test_readme import README, shell_commands

#: How a README line is made small before it runs: (sub-command, option, value). A value replaces the option's
#: value where the line gives one and is added where it does not; None adds the flag alone. "bench poam-table1"
#: options apply to that benchmark only. Mission lines all get the same size, so that `--resume`/`--force` on the
#: run an earlier line made see the options it was made with.
REWRITES: list[tuple[str, str, str | None]] = [
    ("mission", "--budget", "700"),  # 700 samples instead of 800-5000
    ("mission", "--num-inducing", "50"),  # M = 50 (also replaces the README's 300 for ssgp++)
    ("mission", "--quiet", None),
    ("replay", "--option", "num_inducing=50"),  # every replayed model at M = 50
    ("replay", "--quiet", None),
    ("stream", "--max-size", "300"),  # 300 rows of the dataset (README: 2000 / the whole file)
    ("stream", "--quiet", None),
    ("bench poam-table1", "--envs", "valley-ridges"),
    ("bench poam-table1", "--methods", "poam"),
    ("bench poam-table1", "--seeds", "0"),  # one mission instead of 2 (or 250)
    ("bench poam-table1", "--budget", "700"),
    ("bench poam-table1", "--num-inducing", "50"),
    ("bench poam-table1", "--workers", "1"),
    ("bench poam-table1", "--no-results", None),  # keep nothing in a results tree
    ("bench poam-table1", "--quiet", None),
]

#: Lines that cannot run here, by a word they contain, and why.
SKIPS = {
    "--address": "--backend ray --address auto needs a running Ray cluster",
    "--portable": "--portable restarts the process (tests/library/test_portable.py runs it as a process)",
}

#: Lines that only list or print: they run as the README has them.
AS_WRITTEN = [["--version"], ["models"], ["mission", "--list-envs"]]

#: The mission run the README's `--resume`/`--force`/`replay` lines refer to, and the line that makes it.
DEFAULT_RUN = "runs/mission/poam-valley-ridges-seed0"

LINES = shell_commands(README.read_text())


def small(line: str) -> list[str]:
    """The command line's words after `onlinegp`, rewritten by REWRITES."""
    words = shlex.split(line)[1:]
    if words in AS_WRITTEN:
        return words
    command = " ".join(words[:2]) if words[0] == "bench" else words[0]
    for sub, option, value in REWRITES:
        if sub != command:
            continue
        if value is None:
            if option not in words:
                words.append(option)
        elif option in words and option != "--option":
            words[words.index(option) + 1] = value
        else:
            words += [option, value]
    return words


def user_files(directory) -> None:
    """The files the README asks a user to bring, made up small."""
    rng = np.random.default_rng(0)
    # a terrain: one smooth 60 x 80 array in an .npz
    yy, xx = np.mgrid[0:60, 0:80] / 20.0
    np.savez(directory / "my_dem.npz", elevation=np.sin(xx) * np.cos(yy) + 0.3 * xx)
    # a robot's log: input columns, a 'time' column (s) and the measurement 'y' (onlinegp.experiments.replay.load_survey)
    t = np.arange(400.0)
    x1, x2 = 10 * np.cos(t / 60), 10 * np.sin(t / 45)
    log = np.column_stack([x1, x2, t, np.sin(x1 / 3) + np.cos(x2 / 4) + 0.05 * rng.standard_normal(t.size)])
    np.savetxt(directory / "my_log.csv", log, delimiter=",", header="x1,x2,time,y", comments="")
    # a table without header: inputs, then the target in the last column (onlinegp.data.sources.csv_file)
    X = rng.uniform(-1, 1, (400, 3))
    np.savetxt(directory / "my.csv", np.column_stack([X, np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2]]), delimiter=",")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("readme-commands")
    user_files(directory)
    return directory


def invoke(words: list[str]):
    return CliRunner().invoke(app, words, env={"COLUMNS": "200"})


def needs_default_run(words: list[str]) -> bool:
    return any(w.startswith(DEFAULT_RUN) for w in words) and "--force" not in words


def test_readme_has_the_lines_this_module_expects():
    assert len(LINES) >= 10, LINES
    assert any(small(line)[0] == "mission" and "--out" not in line for line in LINES), LINES
    assert any(DEFAULT_RUN in line for line in LINES), f"no README line uses {DEFAULT_RUN}"


def test_rewrite():
    assert small("onlinegp mission --model ssgp++ --num-inducing 300 --planner random --quiet") == [
        *"mission --model ssgp++ --num-inducing 50 --planner random --quiet --budget 700".split()
    ]
    assert small("onlinegp mission --list-envs") == ["mission", "--list-envs"]
    bench = small("onlinegp bench poam-table1 --envs valley-ridges --seeds 0-1 --budget 1500 --workers 2")
    assert bench[bench.index("--seeds") + 1] == "0" and bench[bench.index("--workers") + 1] == "1"
    assert "--no-results" in bench and bench.count("--budget") == 1


@pytest.mark.slow
@pytest.mark.parametrize("line", LINES, ids=[re.sub(r"\s+", " ", line)[9:60] for line in LINES])
def test_readme_command_runs(line, workdir, monkeypatch):
    for word, reason in SKIPS.items():
        if word in shlex.split(line):
            pytest.skip(f"{line!r}: {reason}")
    monkeypatch.chdir(workdir)
    words = small(line)
    if needs_default_run(words) and not (workdir / DEFAULT_RUN).is_dir():
        # run alone (-k, xdist): make the run the earlier README line makes
        first = next(small(x) for x in LINES if x.startswith("onlinegp mission --budget") and "--out" not in x)
        made = invoke(first)
        assert made.exit_code == 0, f"onlinegp {shlex.join(first)} (to make {DEFAULT_RUN}):\n{made.output}"
    result = invoke(words)
    assert result.exit_code == 0, (
        f"README line {line!r} failed as `onlinegp {shlex.join(words)}` (exit {result.exit_code}):\n"
        f"{result.output}\n{result.exception!r}"
    )


@pytest.mark.slow
def test_a_broken_line_fails(workdir, monkeypatch):
    """The check above would catch a README line that no longer runs."""
    monkeypatch.chdir(workdir)
    line = next(x for x in LINES if x.startswith("onlinegp mission --budget"))
    assert invoke(small(line.replace("--budget", "--budgett"))).exit_code != 0
    assert invoke(small("onlinegp replay no_such_log.csv --model poam")).exit_code != 0
    assert invoke(small("onlinegp mission --env no_such_dem.npz")).exit_code != 0
