"""OVC's ``z_steps``: the default reading of Chen et al. 2024 (app. A4) and the paper code's shared Adam on Z."""

import copy

import pytest
import torch

from onlinegp import OVC, POAM
from onlinegp.testing import state_equal, toy, update_failing_after_mutation
from onlinegp.training import Pretraining, Training

X, Y = toy(240, seed=3)
BATCHES = [(X[i : i + 60], Y[i : i + 60]) for i in range(0, 240, 60)]
XS = toy(10, seed=4)[0]
SMALL = {
    "num_inducing": 24,
    "training": Training(steps=5, batch_size=32, pretrain=Pretraining(steps=0)),
    "sketch": None,
}


def fed(model, batches=BATCHES):
    for x, y in batches:
        model.update(x, y)
    return model


def test_default_is_poams_z_opt_m_step_with_noise_weighted_terms():
    """z_steps='separate' (the default) is POAM's own M-step: bit for bit POAM(noise_weighted, optimize_inducing)."""
    ovc = fed(OVC(2, seed=0, **SMALL))
    poam = fed(POAM(2, seed=0, noise_weighted=True, optimize_inducing=True, **SMALL))
    assert ovc.options()["z_steps"] == "separate"
    assert torch.equal(ovc.Z, poam.Z) and torch.equal(ovc.q.mean, poam.q.mean)
    assert torch.equal(ovc.predict(XS).mean, poam.predict(XS).mean)
    assert len(ovc.optimizer.param_groups) == len(poam.optimizer.param_groups)


def test_separate_reprojects_onto_the_moved_z():
    model = fed(OVC(2, seed=0, **SMALL))
    assert torch.equal(model.projected.Z, model.Z) and torch.equal(model.q.Z, model.Z)


def test_shared_keeps_terms_and_q_at_the_e_step_and_its_adam_moments_across_updates():
    model = OVC(2, seed=0, z_steps="shared", **SMALL)
    seen = {}
    real = model._m_step

    def spy(*args, **kwargs):
        seen.update(Z=model.Z.clone(), q=model.q)
        return real(*args, **kwargs)

    model._m_step = spy
    fed(model)
    slot = model.optimizer.param_groups[-1]["params"][0]
    assert slot.shape == model.Z.shape and torch.equal(slot.detach(), model.Z)
    assert int(model.optimizer.state[slot]["step"]) == SMALL["training"].steps * len(
        BATCHES
    )  # one Adam, never restarted
    assert not torch.equal(seen["Z"], model.Z)  # Z moved in the last M-step ...
    assert torch.equal(model.projected.Z, seen["Z"])  # ... the terms stayed at the E-step's Z ...
    assert torch.equal(model.q.Z, model.Z)  # ... and q(u) kept its moments, read at the moved Z
    assert torch.equal(model.q.mean, seen["q"].mean) and torch.equal(model.q.root, seen["q"].root)


def last_z_step(z_steps):
    """Mean distance Z moves in the M-step of the fourth update, and the map after it."""
    model = fed(OVC(2, seed=0, z_steps=z_steps, **SMALL), BATCHES[:3])
    before = {}
    real = model._m_step

    def spy(*args, **kwargs):
        before["Z"] = model.Z.clone()
        return real(*args, **kwargs)

    model._m_step = spy
    model.update(*BATCHES[3])
    return (model.Z - before["Z"]).norm(dim=1).mean(), model.predict(XS).mean


def test_shared_moves_z_less_than_a_fresh_adam_and_changes_the_map():
    """A fresh Adam's first step is lr per coordinate whatever the gradient; the shared Adam's carried moments damp
    Z's steps once its early gradients have passed."""
    shared_step, shared_mean = last_z_step("shared")
    separate_step, separate_mean = last_z_step("separate")
    assert shared_step < 0.75 * separate_step
    assert not torch.allclose(shared_mean, separate_mean)


def test_shared_checkpoint_round_trip_is_exact(tmp_path):
    model = fed(OVC(seed=0, z_steps="shared", **SMALL), BATCHES[:2])
    model.save(tmp_path / "ovc.pt")
    clone = OVC(seed=0, z_steps="shared", **SMALL)
    clone.load(tmp_path / "ovc.pt")
    assert state_equal(model.state_dict(), clone.state_dict())
    for m in (model, clone):
        m.update(*BATCHES[2])
    assert state_equal(model.state_dict(), clone.state_dict())
    assert torch.equal(model.predict(XS).mean, clone.predict(XS).mean)


def test_shared_update_that_fails_part_way_is_rolled_back():
    """Z's slot in the Adam is replaced when M changes: a failed update must still restore the moments exactly."""
    model = fed(OVC(2, seed=0, z_steps="shared", **SMALL), BATCHES[:2])
    untouched, before = copy.deepcopy(model), copy.deepcopy(model.state_dict())
    update_failing_after_mutation(model, *BATCHES[2])
    assert state_equal(before, model.state_dict())
    for m in (model, untouched):
        m.update(*BATCHES[2])
    assert state_equal(model.state_dict(), untouched.state_dict())


def test_shared_keeps_the_moments_of_kept_rows_when_m_grows():
    model = OVC(2, seed=0, z_steps="shared", **{**SMALL, "num_inducing": 40})
    model.update(X[:12], Y[:12])  # fewer points than M: Z has at most 12 rows
    slot = model.optimizer.param_groups[-1]["params"][0]
    rows = slot.shape[0]
    moments = copy.deepcopy(model.optimizer.state[slot])
    model.Z = torch.cat([model.Z, X[100:110] / 2])
    grown = model._shared_z()
    assert grown.shape[0] == rows + 10 and grown is model.optimizer.param_groups[-1]["params"][0]
    state = model.optimizer.state[grown]
    assert torch.equal(state["exp_avg"][:rows], moments["exp_avg"]) and not state["exp_avg"][rows:].any()
    assert torch.equal(state["step"], moments["step"])


def test_z_steps_is_checked():
    with pytest.raises(ValueError, match="z_steps"):
        OVC(z_steps="joint")
    with pytest.raises(ValueError, match="analytic"):
        OVC(z_steps="shared", variational="gradient")
