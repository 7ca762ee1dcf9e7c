"""One conformance suite for every model in the registry (like gpytorch's base test cases for its kernels).

Every registered name passes the contract of :mod:`onlinegp.testing` (:class:`TestEveryModel`): build with no
arguments (the input width fixed by the first batch), stream batches and predict, refuse to predict before its first
batch, reject invalid input with a ValueError that leaves it exactly as it was, roll back exactly when its update
fails part-way, and checkpoint bit-exactly (also before its first batch, and into a model that has never seen data).
The tests below it are the registry's own: names, exports, default options, recorded options, other classes'
checkpoints. Method-specific behaviour is tested in each method's own file.
"""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import onlinegp
from onlinegp import MODELS, OnlineGP, Training, make_model
from onlinegp.testing import ModelConformance, assert_same_model, state_equal

NAMES = sorted(MODELS)

# cheap settings per registry name, so that the whole file runs in seconds
POAM_LIKE = {"num_inducing": 16, "num_steps": 2, "batch_size": 32}
OSGPR_LIKE = {"num_inducing": 16, "num_steps": 3}
MEMBERS = {"num_inducing": 10, "member_options": {"num_steps": 3}}
OPTIONS = {
    **{
        name: POAM_LIKE
        for name in ("full", "online-elbo", "ovc", "ovc++", "pam", "var-opt", "var-ssgp", "z-kmeans", "z-opt", "z-rand")
    },
    "poam": {**POAM_LIKE, "sketch": 8},  # the sketched M-step (the default sketch exceeds M here)
    **{name: OSGPR_LIKE for name in ("osgpr", "ssgp", "ssgp++")},
    **{name: {"num_steps": 3} for name in ("vips", "conditional-variance", "oips")},  # they size Z themselves
    "osvgp": {"num_inducing": 16, "num_steps": 2, "batch_size": 32},
    "exact": {"num_steps": 2, "max_data": 1000},
    "wiski": {"grid_size": 8, "num_steps": 1},
    # two members after two batches, and the third batch joins one of them
    "wgpr": {**MEMBERS, "epsilon": 3.0},
    "solar-gp": {**MEMBERS, "similarity_lengthscale": 0.05},
    "lgpr": {"training": {"steps": 5}, "max_local": 40},
}
NO_SINGLE_KERNEL = {"wgpr", "solar-gp"}  # ensembles of members with their own kernels

CONTRACT = ModelConformance()  # its default stream
BATCHES, XS = CONTRACT.batches(), CONTRACT.prediction_inputs()
X, Y = (torch.cat(t) for t in zip(*BATCHES))


@pytest.fixture(params=NAMES)
def name(request) -> str:
    return request.param


def build(name: str, **kw) -> OnlineGP:
    return make_model(name, **OPTIONS.get(name, {}), **kw)


class TestEveryModel(ModelConformance):
    """The contract of :mod:`onlinegp.testing`, over every registered name with its cheap options."""

    @pytest.fixture(autouse=True)
    def _name(self, name: str) -> None:
        self.name = name

    @property
    def single_kernel(self) -> bool:
        return self.name not in NO_SINGLE_KERNEL

    def make(self, **kw) -> OnlineGP:
        return build(self.name, **kw)


def fed(name: str, batches: int = 2) -> OnlineGP:
    model = build(name)
    for x, y in BATCHES[:batches]:
        model.update(x, y)
    return model


def test_default_construction_streams(name):
    """The 'Done when' criterion: ``m = onlinegp.<Class>(); m.update(x, y)`` for every name, default options."""
    factory, description = MODELS[name]
    assert isinstance(description, str) and description
    cls = getattr(factory, "func", factory)  # a preset variant (ablation) is a partial of its class
    assert getattr(onlinegp, cls.__name__) is cls and cls.__name__ in onlinegp.__all__
    model = getattr(onlinegp, cls.__name__)() if factory is cls else make_model(name)
    assert isinstance(model, cls) and model.input_dim is None
    for lo in (0, 25):
        report = model.update(X[lo : lo + 25], Y[lo : lo + 25])
    assert report.num_data == 50 and model.input_dim == 2
    pred = model.predict(XS)
    assert torch.isfinite(pred.mean).all() and (pred.var_f >= 0).all()


ENSEMBLES = [
    name for name in NAMES if hasattr(getattr(MODELS[name].factory, "func", MODELS[name].factory), "num_models")
]


@pytest.mark.parametrize("name", ENSEMBLES)
def test_an_ensemble_checkpoints_several_members(name):
    """The contract's checkpoints (after two batches) restore several members (local models) of each ensemble."""
    assert fed(name, 2).num_models >= 2


def test_the_rollback_copy_is_a_deepcopy_sharing_no_tensor():
    """``copy_state``, the fast copy every update takes for its rollback (an ensemble's holds each member's state
    dict, an OrderedDict of posteriors and summaries), gives what ``copy.deepcopy`` gives and shares no storage."""
    from onlinegp.base import copy_state

    model = fed("wgpr", 2)
    state = model.state_dict()
    member = state["_extra_state"]["extra"]["members"][0]
    assert type(member).__name__ == "OrderedDict" and hasattr(member, "_metadata")
    predictor = member["_extra_state"]["dynamic"]["predictor"]
    assert predictor.quadratic() is not None  # fills its cached (α, Q), which is not state
    copied, deep = copy_state(state), copy.deepcopy(state)
    assert state_equal(copied, deep) and copied["_extra_state"]["extra"]["members"][0]._metadata == member._metadata
    copy_predictor = copied["_extra_state"]["extra"]["members"][0]["_extra_state"]["dynamic"]["predictor"]
    assert type(copy_predictor) is type(predictor) and copy_predictor._quadratic is None

    def tensors(value):
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, dict):
            for v in value.values():
                yield from tensors(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                yield from tensors(v)
        elif hasattr(value, "__dict__"):
            yield from tensors(vars(value))

    originals = {t.untyped_storage().data_ptr() for t in tensors(state) if t.numel()}
    assert originals and not originals & {t.untyped_storage().data_ptr() for t in tensors(copied) if t.numel()}


def _constructor_parameters(cls: type) -> set[str]:
    """Every keyword a class's constructor chain declares (the test's oracle; the library never reads signatures)."""
    import inspect

    names = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None and issubclass(klass, OnlineGP):
            params = inspect.signature(init).parameters.values()
            names |= {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    return names - {"self", "input_dim"}


@pytest.mark.parametrize("built", [False, True], ids=["unbuilt", "after-update"])
def test_recorded_options_rebuild_the_same_model(name, built):
    """``options()`` is what the instance runs with: a model built from them reports the same options, and
    (after the same batch) makes the same predictions."""
    model = fed(name, batches=1) if built else build(name)
    options = model.options()
    rebuilt = make_model(name, **options)
    if built:
        torch.manual_seed(1)  # the global generator plays no part
        rebuilt.update(*BATCHES[0])
        assert_same_model(model, rebuilt, XS)
    assert rebuilt.options() == model.options()
    assert onlinegp.base.jsonable_options(options) == json.loads(json.dumps(onlinegp.base.jsonable_options(options)))


SEEDED_RUN = """
import hashlib, sys, torch
from onlinegp import make_model
from onlinegp.testing import toy

torch.manual_seed(int(sys.argv[1]))  # the global generator differs between the processes
X, Y = toy(80, seed=11)
for name in sys.argv[2:]:
    model = make_model(name, seed=0)
    objectives = [model.update(X[i : i + 40], Y[i : i + 40]).objective for i in (0, 40)]
    p = model.predict(X[:20])
    print(name, objectives, hashlib.sha256(p.mean.numpy().tobytes() + p.var_y.numpy().tobytes()).hexdigest())
"""


def test_a_seed_gives_bit_identical_results_in_any_process():
    """Issue 35, item 8: ``make_model("ssgp", seed=0)`` gave objectives 35.5 / 21.9 / 23.6 in three processes (the
    AK's initial weights came from torch's global generator). Every registered model, default options, two
    processes whose global generators differ."""
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", SEEDED_RUN, str(k), *NAMES],
            cwd=Path(__file__).resolve().parents[3],  # the repository root: `tests.reference` imports from there
            env={**os.environ, "OMP_NUM_THREADS": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in (1, 2)
    ]
    (first, err), (second, _) = (run.communicate(timeout=600) for run in runs)
    assert all(run.returncode == 0 for run in runs), err
    assert len(first.splitlines()) == len(NAMES)
    for a, b in zip(first.splitlines(), second.splitlines()):
        assert a == b


def test_recorded_options_cover_every_constructor_option(name):
    """No option of the constructor chain is left out of the record, except those a class sets itself from its own
    (VIPS, Conditional Variance and OIPS build their selector from delta/max_new, eta, rho)."""
    factory = MODELS[name].factory
    cls = getattr(factory, "func", factory)
    derived = {"inducing", "num_inducing"} if name in ("vips", "conditional-variance", "oips") else set()
    assert _constructor_parameters(cls) - derived <= set(build(name).options())


@pytest.mark.parametrize(
    "name, key, value",
    [
        ("ssgp++", "training", Training(optimizer="adam", lr=1e-2, lr_network=1e-3)),  # committed configs said 'lbfgs'
        ("ssgp", "training", Training(optimizer="lbfgs", steps=200, lr=1e-2, lr_network=1e-3)),
        ("ovc++", "optimize_inducing", False),  # the committed configs said True
        ("ovc", "optimize_inducing", True),
        ("ovc", "noise_weighted", True),
        ("full", "terms", "all"),
        ("pam", "inducing_from", "all"),
        ("z-opt", "inducing", "random-first"),
        ("ssgp++", "kernel", "auto"),
    ],
)
def test_recorded_options_are_the_ones_the_model_runs(name, key, value):
    assert make_model(name).options()[key] == value


def test_options_resolve_at_the_first_batch():
    """'auto' kernels and width-scaled steps are recorded as what they became, once the width is known."""
    model = make_model("ssgp++")
    assert model.options()["training"].steps is None
    model.update(*BATCHES[0])
    assert model.options()["kernel"] == "ak" and model.options()["training"].steps == model.num_steps == 10


def test_a_class_that_fixes_an_option_refuses_another_value():
    with pytest.raises(ValueError, match="OVCpp fixes optimize_inducing=False"):
        make_model("ovc++", optimize_inducing=True)
    with pytest.raises(ValueError, match="FULL fixes terms='all'"):
        make_model("full", terms="online")
    make_model("full", terms="all")  # its own value is accepted, so its record rebuilds it


def test_a_checkpoint_of_another_class_is_refused_and_changes_nothing(name, tmp_path):
    """Issue 35: 124 of 464 cross-class loads went through and answered wrongly, others failed half-way."""
    cls = getattr(MODELS[name].factory, "func", MODELS[name].factory)
    other = "poam" if cls is not type(build("poam")) else "osgpr"
    source = fed(other, 2)
    source.save(tmp_path / "other.pt")
    for model in (build(name), fed(name, 1)):
        before = copy.deepcopy(model.state_dict())
        with pytest.raises(ValueError, match=f"{type(source).__name__}.*{other}.*{type(model).__name__}"):
            model.load(tmp_path / "other.pt")
        assert state_equal(before, model.state_dict())


@pytest.mark.parametrize("content", [b"", b"\x80\x04garbage", b"PK\x03\x04truncated"])
def test_a_damaged_checkpoint_is_a_clear_error_naming_the_file(content, tmp_path):
    path = tmp_path / "model.pt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="model.pt"):
        make_model("osgpr").load(path)
