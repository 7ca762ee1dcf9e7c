"""The training spec (issue 32, item 3): one :class:`Training` for every model, validated where it is given, the flat
keywords of earlier versions folded into it, and reported by ``options()`` so that a record rebuilds its model."""

import json
import re
import warnings

import pytest
import torch

import onlinegp
from onlinegp import MODELS, make_model
from onlinegp.base import jsonable_options, model_record
from onlinegp.models import OSVGP, POAM, WISKI, ExactGP
from onlinegp.models.registry import make_recorded_model, recorded_options
from onlinegp.options import model_options
from onlinegp.testing import toy
from onlinegp.training import (
    FLAT_TRAINING,
    LEGACY_REMOVED_IN,
    LEGACY_TRAINING,
    SETTLE_WINDOW,
    Pretraining,
    Training,
    gradient_steps,
    training_options,
)


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"lr": -0.01}, "training.lr"),
        ({"lr_network": float("nan")}, "training.lr_network"),
        ({"lr_variational": "fast"}, "training.lr_variational"),
        ({"optimizer": "sgd"}, "training.optimizer"),
        ({"steps": -1}, "training.steps"),
        ({"steps": 2.5}, "training.steps"),
        ({"batch_size": 0}, "training.batch_size"),
        ({"tolerance": -1e-6}, "training.tolerance"),
        ({"tolerance": float("inf")}, "training.tolerance"),
        ({"pretrain": {"lr": -1.0}}, "training.pretrain.lr"),
        ({"pretrain": {"steps": -3}}, "training.pretrain.steps"),
        ({"pretrain": {"epochs": 3}}, "training.pretrain field 'epochs'"),
        ({"rate": 0.1}, "training field 'rate'"),
    ],
)
def test_a_bad_field_is_a_value_error_naming_it(fields, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        Training.of(fields)
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):  # at the model's boundary too
        POAM(training=fields)


def test_a_model_refuses_a_field_it_does_not_use_and_an_optimizer_it_lacks():
    with pytest.raises(ValueError, match=r"ExactGP does not use training\.batch_size"):
        ExactGP(training=Training(batch_size=64))
    with pytest.raises(ValueError, match=r"WISKI does not use training\.lr_variational"):
        make_model("wiski", training={"lr_variational": 0.1})
    with pytest.raises(ValueError, match=r"POAM trains with 'adam', got training\.optimizer='lbfgs'"):
        POAM(training=Training(optimizer="lbfgs"))


def test_unset_fields_take_the_models_defaults_and_the_spec_round_trips_as_a_dict():
    model = POAM(2, training=Training(lr=0.05, pretrain=Pretraining(steps=3)))
    assert model.training == Training(
        optimizer="adam", steps=10, lr=0.05, lr_network=1e-3, batch_size=256, pretrain=Pretraining(steps=3, lr=5e-2)
    )
    assert Training.of(model.training.as_dict()) == model.training
    assert OSVGP().training == Training(optimizer="adam", lr=0.05, lr_variational=5e-3, batch_size=256)
    assert make_model("ssgp++").training.optimizer == "adam" and make_model("ssgp").training.steps == 200
    assert ExactGP(training={"optimizer": "lbfgs"}).training.steps == 100  # to convergence, as before


def test_the_flat_keywords_fold_into_the_spec_in_order():
    read = lambda options, flat=FLAT_TRAINING: training_options(options, flat, warn=False)  # noqa: E731 - as records
    options = read({"num_steps": 3, "kernel": "rbf", "lr_attention": 2e-3, "pretrain_steps": 0})
    assert options == {"kernel": "rbf", "training": Training(steps=3, lr_network=2e-3, pretrain=Pretraining(steps=0))}
    # a later option wins, field by field, as on a command line
    assert read({"pretrain_steps": 0, "training": {"steps": 4}})["training"] == Training(
        steps=4, pretrain=Pretraining(steps=0)
    )
    assert read({"training": {"steps": 4}, "num_steps": 6})["training"] == Training(steps=6)
    # O-SVGP's lr was its variational rate and lr_hyper θ's; fit='lbfgs' fitted to convergence whatever num_steps said
    flat = {**FLAT_TRAINING, **OSVGP.FLAT_TRAINING}
    assert read({"lr": 1e-3, "lr_hyper": 0.1}, flat)["training"] == Training(lr_variational=1e-3, lr=0.1)
    assert read({"fit": "lbfgs", "num_steps": 10})["training"] == Training(optimizer="lbfgs")
    assert read({"kernel": "rbf"}) == {"kernel": "rbf"}
    with pytest.raises(ValueError, match=r"training\.lr"):
        make_model("poam", lr=-1.0)


#: each deprecated flat keyword, a model that takes it, a value, and the training= that replaces it
LEGACY = {
    "fit": ("exact", "lbfgs", {"optimizer": "lbfgs"}),
    "fit_steps": ("lgpr", 7, {"steps": 7}),
    "lr_attention": ("ssgp++", 2e-3, {"lr_network": 2e-3}),
    "lr_projection": ("wiski", 1e-3, {"lr_network": 1e-3}),
    "pretrain_steps": ("poam", 0, {"pretrain": {"steps": 0}}),
    "pretrain_lr": ("wiski", 0.05, {"pretrain": {"lr": 0.05}}),
    "pretrain_lr_projection": ("wiski", 4e-3, {"pretrain": {"lr_network": 4e-3}}),
    "lr_hyper": ("osvgp", 0.02, {"lr": 0.02}),
}


def test_the_legacy_keywords_are_those_spelled_otherwise_than_their_field_and_go_in_the_next_minor():
    assert set(LEGACY_TRAINING) == set(LEGACY) and LEGACY_TRAINING["lr_hyper"] == OSVGP.FLAT_TRAINING["lr_hyper"]
    assert {k: v for k, v in LEGACY_TRAINING.items() if k != "lr_hyper"} == {
        k: v for k, v in FLAT_TRAINING.items() if k in LEGACY_TRAINING
    }
    assert not {"num_steps", "optimizer", "batch_size", "lr"} & set(LEGACY_TRAINING)  # current names: no warning
    major, minor, _ = (int(part) for part in onlinegp.__version__.split("."))
    assert LEGACY_REMOVED_IN == f"{major}.{minor + 1}.0"


@pytest.mark.parametrize("key", sorted(LEGACY))
def test_each_legacy_keyword_warns_naming_its_replacement(key):
    name, value, spec = LEGACY[key]
    expected = (
        f"{key}={value!r} is deprecated and will be removed in onlinegp {LEGACY_REMOVED_IN}: pass training={spec!r}"
    )
    with pytest.warns(FutureWarning, match=re.escape(expected)) as caught:
        old = make_model(name, seed=1, **{key: value})
    assert len(caught) == 1 and caught[0].filename == __file__  # where the user gave it
    assert f'--option "training={spec!r}"' in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert old.options() == make_model(name, seed=1, training=spec).options()
    with pytest.warns(FutureWarning, match=re.escape(expected)):
        assert model_options([f"{key}={value}"]) == {key: value}  # --option KEY=VALUE


def test_current_names_and_recorded_configs_warn_nothing():
    recorded = {"num_steps": 3, "lr": 0.05, "pretrain_steps": 0, "lr_attention": 2e-3, "batch_size": 40}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_model("poam", num_steps=3, lr=0.05, optimizer="adam", batch_size=40)
        assert model_options(["num_steps=3", "lr=0.05", "training={'steps': 2}"])["training"] == {"steps": 2}
        rebuilt = make_recorded_model("poam", seed=1, **recorded)
        assert recorded_options("poam", recorded)["training"] == Training(
            steps=3, lr=0.05, lr_network=2e-3, batch_size=40, pretrain=Pretraining(steps=0)
        )
        assert recorded_options("osvgp", {"lr_hyper": 0.1})["training"] == Training(lr=0.1)
        assert training_options({"fit": "lbfgs"}, warn=False)["training"] == Training(optimizer="lbfgs")
    with pytest.warns(FutureWarning):
        again = make_model("poam", seed=1, **recorded)
    assert again.options() == rebuilt.options()


@pytest.mark.parametrize(
    "name, flat, spec",
    [
        (
            "poam",
            {"num_steps": 3, "lr": 0.05, "pretrain_steps": 4, "batch_size": 40},
            {"steps": 3, "lr": 0.05, "batch_size": 40, "pretrain": {"steps": 4}},
        ),
        ("osvgp", {"num_steps": 2, "lr": 0.01, "lr_hyper": 0.02}, {"steps": 2, "lr_variational": 0.01, "lr": 0.02}),
        ("ssgp++", {"num_steps": 4, "lr": 0.03, "lr_attention": 2e-3}, {"steps": 4, "lr": 0.03, "lr_network": 2e-3}),
        (
            "wiski",
            {"num_steps": 1, "lr_projection": 1e-3, "pretrain_steps": 5, "pretrain_lr_projection": 4e-3},
            {"steps": 1, "lr_network": 1e-3, "pretrain": {"steps": 5, "lr_network": 4e-3}},
        ),
        ("exact", {"fit": "lbfgs", "num_steps": 10}, {"optimizer": "lbfgs"}),
        ("lgpr", {"fit_steps": 7}, {"steps": 7}),
    ],
)
def test_old_flat_keys_give_the_same_model_bit_for_bit(name, flat, spec):
    X, y = toy(80, seed=4)
    old, new = make_recorded_model(name, seed=1, **flat), make_model(name, seed=1, training=spec)
    assert old.options() == new.options()
    for lo in (0, 50):
        old.update(X[lo : lo + 50], y[lo : lo + 50])
        new.update(X[lo : lo + 50], y[lo : lo + 50])
    assert torch.equal(old.predict(X).mean, new.predict(X).mean) and torch.equal(
        old.predict(X).var_y, new.predict(X).var_y
    )


@pytest.mark.parametrize("name", sorted(MODELS))
def test_options_report_the_spec_readably_and_round_trip_through_make_model(name):
    model = make_model(name, input_dim=2)
    options = model.options()
    record = jsonable_options(options)
    loaded = json.loads(json.dumps(record))  # as a config.json reads back (the dtype by name, which stays float64)
    again = make_model(name, **{k: v for k, v in loaded.items() if k != "dtype"})
    assert again.options() == make_model(name, **options).options()
    if "training" in options:
        assert isinstance(options["training"], Training) and record["training"] == options["training"].as_dict()
        assert model_record(model)["num_steps"] == options["training"].steps


def test_num_steps_is_the_specs_steps_and_switches_them():
    model = WISKI(2, grid_size=8)
    assert model.num_steps is None  # one step per point of a batch
    model.num_steps = 0
    assert model.training.steps == 0 and model.options()["training"].steps == 0


def test_a_class_load_folds_the_flat_keywords_as_make_model(tmp_path):
    """``POAM.load(path, num_steps=3)`` builds the model that ``make_model('poam', num_steps=3)`` does."""
    X, y = toy(120, seed=5)
    model = POAM(num_inducing=16, training=Training(steps=3, lr=0.02))
    model.update(X, y)
    path = tmp_path / "poam.pt"
    model.save(str(path))
    flat = POAM.load(str(path), num_inducing=16, num_steps=3, lr=0.02)
    assert flat.training == model.training and (flat.training.steps, flat.training.lr) == (3, 0.02)
    assert torch.equal(flat.predict(X[:5]).mean, model.predict(X[:5]).mean)
    with pytest.raises(TypeError):
        POAM.load(str(path), num_inducing=16, not_an_option=1)


def test_gradient_steps_stop_once_settled():
    """With a tolerance the steps stop at the first step where the objective (per unit of ``scale``) has moved by
    less than ``tolerance`` per step over the last ``SETTLE_WINDOW`` steps (checked against the recorded values); a
    zero tolerance takes every step."""

    def run(tolerance: float) -> tuple[list[float], float | None]:
        x = torch.tensor([3.0], dtype=torch.float64, requires_grad=True)
        adam = torch.optim.Adam([x], lr=0.1)
        values: list[float] = []

        def objective() -> torch.Tensor:
            value = -4.0 * (x**2).sum()
            values.append(float(value))
            return value

        return values, gradient_steps([adam], objective, 2000, scale=4.0, tolerance=tolerance)

    every, last = run(0.0)
    assert len(every) == 2000 and last == every[-1]
    stopped, last = run(1e-4)
    assert last == stopped[-1] and SETTLE_WINDOW < len(stopped) < 2000
    moved = [
        abs(stopped[i] - stopped[i - SETTLE_WINDOW]) / (4.0 * SETTLE_WINDOW) for i in range(SETTLE_WINDOW, len(stopped))
    ]
    assert moved[-1] < 1e-4 and all(m >= 1e-4 for m in moved[:-1])
    assert stopped == every[: len(stopped)]
