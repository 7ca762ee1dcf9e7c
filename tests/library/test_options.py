"""`--option KEY=VALUE`: one parser for every command (onlinegp.options)."""

import pytest
from typer.testing import CliRunner

from onlinegp.experiments.cli import app
from onlinegp.options import parse_options, parse_value

runner = CliRunner()


def text(result) -> str:
    """The output with rich's box drawing and line wrapping removed."""
    return " ".join(result.output.replace("│", " ").replace("╭", " ").replace("╰", " ").split())


@pytest.mark.parametrize(
    "text, value",
    [
        ("0.005", 0.005),
        ("1e-3", 1e-3),
        (" 128 ", 128),
        ("-2", -2),
        ("True", True),
        ("true", True),
        ("false", False),
        ("None", None),
        ("none", None),
        ("null", None),
        ("(1, 2)", (1, 2)),
        ("[1, 2]", [1, 2]),
        ("{'ard': False}", {"ard": False}),
        ('{"ard": false, "lengthscale": 0.3}', {"ard": False, "lengthscale": 0.3}),
        ("vips", "vips"),
        ("conditional-variance", "conditional-variance"),
        ("'vips'", "vips"),
        ("a b", "a b"),
        ("[1, 2", "[1, 2"),
        ("", ""),
        ("Nonesuch", "Nonesuch"),
    ],
)
def test_values_are_python_literals_else_json_else_strings(text, value):
    parsed = parse_value(text)
    assert parsed == value and type(parsed) is type(value)


def test_items_become_keyword_arguments():
    assert parse_options(["sketch=None", "lr=0.005", "inducing=vips", " batch_size = 128 ", "expr=a=b"]) == {
        "sketch": None,
        "lr": 0.005,
        "inducing": "vips",
        "batch_size": 128,
        "expr": "a=b",
    }
    assert parse_options(["lr=1", "lr=2"]) == {"lr": 2}
    assert parse_options(None) == {} and parse_options([]) == {}


@pytest.mark.parametrize("item", ["sketch", "=1", "1a=2", "num-inducing=5", " =3"])
def test_malformed_items_are_refused(item):
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_options([item])


OPTIONS = ["sketch=none", "lr=0.005", "inducing=vips", 'kernel_options={"ard": false}']
PARSED = {"sketch": None, "lr": 0.005, "inducing": "vips", "kernel_options": {"ard": False}}


def test_mission_and_stream_read_options_alike(monkeypatch, tmp_path):
    from onlinegp.experiments import stream
    from onlinegp.experiments.simulator import run as mission_run

    seen = {}

    def fake_open_mission(config, out, resume):
        seen["mission"] = config.model_options
        raise ValueError("stopped before work")

    def fake_run_stream(config, out, quiet):
        seen["stream"] = config.options
        return []

    monkeypatch.setattr(mission_run, "open_mission", fake_open_mission)
    monkeypatch.setattr(stream, "run_stream", fake_run_stream)
    args = [arg for item in OPTIONS for arg in ("--option", item)]
    result = runner.invoke(app, ["mission", "--out", str(tmp_path / "m"), "--quiet", *args])
    assert result.exit_code == 2 and "stopped before work" in text(result)
    stream_args = ["stream", "--dataset", "synthetic2", "--model", "poam", "--out", str(tmp_path / "s"), "--quiet"]
    result = runner.invoke(app, [*stream_args, *args])  # options POAM takes: stream checks them first
    assert result.exit_code == 0, result.output
    assert seen == {"mission": PARSED, "stream": PARSED}


@pytest.mark.parametrize("command", [["mission"], ["stream", "--dataset", "synthetic2"]])
def test_a_malformed_option_is_a_usage_error_in_every_command(command, tmp_path):
    result = runner.invoke(app, [*command, "--out", str(tmp_path / "run"), "--quiet", "--option", "sketch"])
    assert result.exit_code == 2 and "KEY=VALUE" in text(result)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "command", [["mission"], ["stream", "--dataset", "synthetic2"], ["replay", "survey.csv", "--model", "osgpr"]]
)
def test_every_command_takes_dash_o_for_option(command, tmp_path):
    """``-o`` is short for ``--option`` in every command that builds models (it was only stream's)."""
    result = runner.invoke(app, [*command, "--out", str(tmp_path / "run"), "--quiet", "-o", "sketch"])
    assert result.exit_code == 2 and "KEY=VALUE" in text(result), text(result)
