"""A command's options declared once, as the fields of the dataclass they fill in: ``onlinegp mission``'s settings
are :class:`MissionConfig`'s fields (with :class:`ModelSettings`'s and :class:`FieldOptions`'s gathered into its
``model_options`` and ``field_options``), and :func:`mission_config` reads them back by the same declaration."""

import dataclasses

import pytest
import typer

from onlinegp.experiments import flags
from onlinegp.experiments.cli import app, declared_options
from onlinegp.experiments.cli.mission import mission_command
from onlinegp.experiments.simulator import fields
from onlinegp.experiments.simulator.fields import DEFAULT_ENV, FieldOptions
from onlinegp.experiments.simulator.mission import MissionConfig, ModelSettings
from onlinegp.experiments.simulator.mission_settings import mission_config

#: the settings ``onlinegp mission`` has taken since before they were declared on MissionConfig, in their help's order
MISSION_FLAGS = (
    "--env --model --budget --seed --planner --init --num-inducing --num-steps --kernel --inducing --animate --profile "
    "--sensing-rate --max-turn-rate --interpolation --extent --cell-size --array --first-row --nodata --values "
    "--noise-std --speed --robots --coordination --budget-distance --schedule --fleet --comm-radius --merge-theta"
).split()


def _mission_params() -> list:
    return typer.main.get_command(app).commands["mission"].params


def test_every_mission_setting_is_a_field_of_the_dataclass_it_fills_in():
    """The command's parameters are its own (run directory, service, listing: what no mission records) followed by
    the options the dataclasses declare, each with the field's help and default, and no other."""
    code = mission_command.__code__
    own = list(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])
    declared = [f.name for _, f in flags.declared(MissionConfig)]
    assert [p.name for p in _mission_params()] == own + declared
    assert not set(own) & {f.name for f in dataclasses.fields(MissionConfig)}
    assert len(set(declared)) == len(declared)  # no option declared twice
    by_name = {p.name: p for p in _mission_params()}
    assert [by_name[name].opts[0] for name in declared] == MISSION_FLAGS
    for owner, field in flags.declared(MissionConfig):
        param = by_name[field.name]
        assert param.help == field.metadata["help"] and param.default == field.default, field.name
        assert owner in (MissionConfig, ModelSettings, FieldOptions)
    assert [f.name for _, f in flags.declared(ModelSettings)] == ["inducing"]
    assert [f.name for _, f in flags.declared(FieldOptions)] == [f.name for f in dataclasses.fields(FieldOptions)]
    assert by_name["env"].default == DEFAULT_ENV and not by_name["env"].show_default  # its help says it
    hidden = {"num_candidates", "distance_weight", "num_pilot_waypoints", "num_random_init", "eval_grid"}
    assert not (hidden | {"task_extent", "input_scaling", "model_options", "field_options"}) & set(by_name)


def test_mission_config_reads_the_settings_by_the_same_declaration():
    plain = mission_config(**{f.name: None for _, f in flags.declared(MissionConfig)})
    assert plain == MissionConfig() and plain.env == DEFAULT_ENV
    assert plain.model_options == {} and plain.field_options is None
    config = mission_config(
        model_options={"inducing": "pivoted", "lr": 0.01},
        inducing="vips",
        extent="native",
        cell_size="0.5",
        nodata=-9999.0,
        budget=100,
        robots=None,
        num_candidates=64,
    )
    assert config.model_options == {"inducing": "vips", "lr": 0.01}  # --inducing after --option inducing=
    assert config.field_options == {"extent": "native", "cell_size": "0.5", "nodata": -9999.0}
    assert list(config.field_options) == ["extent", "cell_size", "nodata"]  # FieldOptions' order, as recorded
    assert (config.budget, config.robots, config.num_candidates) == (100, None, 64)
    with pytest.raises(TypeError, match="no setting"):
        mission_config(not_a_setting=1)


def test_load_field_knows_the_field_options_the_command_takes():
    with pytest.raises(ValueError, match="known: " + ", ".join(f.name for f in dataclasses.fields(FieldOptions))):
        fields.load_field(DEFAULT_ENV, resolution=3)


def test_an_option_of_a_none_default_reads_its_annotation():
    @dataclasses.dataclass(frozen=True)
    class Options:
        size: int | None = flags.option(None, "a size")
        names: tuple[str, ...] = flags.option(("a", "b"), "names")
        rate: float = flags.option(0.5, "a rate", flag="--the-rate")

    @dataclasses.dataclass(frozen=True)
    class Ambiguous:
        either: int | str | None = flags.option(None, "ambiguous")

    found = {f.name: flags.cli_type(Options, f) for f in dataclasses.fields(Options)}
    assert found == {"size": int, "names": str, "rate": float}
    with pytest.raises(TypeError, match="cli_type"):
        declared_options(Ambiguous)
    options = declared_options(Options)
    assert options["names"][1].default == "a,b" and options["rate"][1].param_decls == ("--the-rate",)
