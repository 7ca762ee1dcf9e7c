"""The README works as written: its Python blocks run, every `onlinegp ...` command it shows names a real
sub-command with real options (and the cheap ones run), and its relative links point at files that exist."""

import re
import shlex
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from onlinegp import MODELS
from onlinegp.experiments.cli import app

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CHEAP = {("--version",), ("models",), ("mission", "--list-envs")}  # commands the test runs, not only parses


def test_readme_quick_start_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python example"
    monkeypatch.chdir(tmp_path)
    registered = dict(MODELS)
    try:
        for code in blocks:
            exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    finally:  # the README registers an example model: leave the registry as the other tests expect it
        MODELS.clear()
        MODELS.update(registered)


def shell_commands(text: str) -> list[str]:
    """Every `onlinegp ...` line of the ```bash blocks, without its trailing comment."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = line.split(" #", 1)[0].strip()
            if line.startswith("onlinegp"):
                lines.append(line)
    return lines


def command_problems(line: str) -> list[str]:
    """What is wrong with one `onlinegp ...` command line: an unknown sub-command, or options it does not take.

    The sub-command's ``--help`` must succeed, and every option used must be one of its declared options and appear
    in that help text."""
    words = shlex.split(line)[1:]
    group = typer.main.get_command(app)
    command, path = group, []
    while hasattr(command, "commands") and words and not words[0].startswith("-"):
        name = words.pop(0)
        if name not in command.commands:
            return [f"{line!r}: no sub-command {' '.join([*path, name])!r}"]
        command, path = command.commands[name], [*path, name]
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "250"})
    if result.exit_code != 0:
        return [f"{line!r}: `onlinegp {' '.join(path)} --help` failed: {result.output}"]
    declared = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    used = {w.split("=", 1)[0] for w in words if w.startswith("-")}
    return [
        f"{line!r}: `onlinegp {' '.join(path)}` has no option {flag}"
        for flag in sorted(used)
        if flag not in declared or flag not in result.output
    ]


def test_readme_commands_exist_with_their_options():
    lines = shell_commands(README.read_text())
    assert len(lines) >= 10, lines
    problems = [p for line in lines for p in command_problems(line)]
    assert not problems, "\n".join(problems)


def test_command_check_catches_mistakes():
    assert command_problems("onlinegp mission --budget 10 --seed 1") == []
    assert command_problems("onlinegp bench poam-table1 --seeds 0-1 --workers 2") == []
    assert command_problems("onlinegp mission --no-such-option 3")
    assert command_problems("onlinegp missions --budget 10")
    assert command_problems("onlinegp bench no-such-bench")
    assert command_problems("onlinegp stream --dataset x --budget 10")  # --budget belongs to mission


@pytest.mark.parametrize("words", sorted(CHEAP))
def test_readme_cheap_commands_run(words):
    assert any(shlex.split(line)[1:] == list(words) for line in shell_commands(README.read_text())), words
    result = CliRunner().invoke(app, list(words))
    assert result.exit_code == 0, result.output
    assert result.output.strip()


@pytest.mark.parametrize("page", ["README.md", "benchmarks/README.md"])
def test_relative_links_resolve(page):
    path = ROOT / page
    targets = re.findall(r"\]\(([^)\s]+)\)", path.read_text())
    local = [t.split("#", 1)[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    assert local, f"{page} links no files"
    missing = [t for t in local if t and not (path.parent / t).exists()]
    assert not missing, f"{page} links to missing files: {missing}"
