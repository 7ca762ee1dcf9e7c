"""A scaling fitted on a first batch that covers a small part of the area widens with the data (onlinegp.scaling,
``OnlineGP._follow``): exactly for stationary kernels, refused with what to do by models that cannot follow."""

import gpytorch
import numpy as np
import pytest
import torch

from onlinegp import make_model
from onlinegp.kernels import dense, follow_inputs, make_kernel
from onlinegp.metrics import smse
from onlinegp.scaling import Scaler

DT = torch.float64


def corner_stream(n_batches=12, size=40, seed=0):
    """A vehicle's stream: a first batch in a 2 x 1 corner of a 60 x 40 area, later ones sweeping the rest."""
    rng = np.random.default_rng(seed)
    for k in range(n_batches):
        reach = 1 + (k / (n_batches - 1)) * 59
        x = np.column_stack([rng.uniform(0, reach, size), rng.uniform(0, max(1.0, reach * 40 / 60), size)])
        yield x, np.sin(x[:, 0] / 8) + np.cos(x[:, 1] / 6) + 0.05 * rng.standard_normal(size)


def test_covering_maps_old_scaled_inputs_onto_new_ones():
    scaler = Scaler(2, torch.tensor([[0.0, 10.0], [2.0, 11.0]], dtype=DT))
    x = torch.tensor([[-3.0, 10.5], [1.0, 20.0]], dtype=DT)
    bounds, scale, shift = scaler.covering(x)
    assert torch.equal(bounds, torch.tensor([[-3.0, 10.0], [2.0, 20.0]], dtype=DT))
    probe = torch.tensor([[0.5, 10.2], [-1.0, 15.0]], dtype=DT)
    before = scaler.x(probe)
    scaler.set_x_bounds(bounds)
    torch.testing.assert_close(before * scale + shift, scaler.x(probe), rtol=0, atol=1e-15)
    assert scaler.x(x).abs().max() <= 1 + 1e-15


@pytest.mark.parametrize(
    "name, options", [("rbf", {}), ("matern32", {}), ("rbf", {"ard": False}), ("matern52-product", {}), ("ak", {})]
)
def test_a_followed_kernel_is_the_same_function_of_the_same_places(name, options):
    torch.manual_seed(0)
    kernel = make_kernel(name, 2, DT, **options)
    x1, x2 = torch.rand(7, 2, dtype=DT) * 2 - 1, torch.rand(5, 2, dtype=DT) * 2 - 1
    before = dense(kernel, x1, x2)
    uniform = name != "rbf" or options.get("ard", True) is not False
    scale = torch.tensor([0.1, 0.1 if name == "matern52-product" else 0.25], dtype=DT)
    scale = scale if uniform or name == "ak" else torch.full((2,), 0.1, dtype=DT)
    shift = torch.tensor([0.3, -0.2], dtype=DT)
    assert follow_inputs(kernel, scale, shift)
    after = dense(kernel, x1 * scale + shift, x2 * scale + shift)
    if name == "ak":  # the same function of the scaled inputs: it stretches with the range
        torch.testing.assert_close(dense(kernel, x1, x2), before, rtol=0, atol=0)
    else:
        torch.testing.assert_close(after, before, rtol=1e-12, atol=1e-14)


def test_a_kernel_that_cannot_follow_is_left_as_it_was():
    isotropic = make_kernel("rbf", 2, DT, ard=False)
    periodic = gpytorch.kernels.ScaleKernel(gpytorch.kernels.PeriodicKernel()).to(DT)
    for kernel in (isotropic, periodic):
        before = [p.detach().clone() for p in kernel.parameters()]
        assert not follow_inputs(kernel, torch.tensor([0.1, 0.5], dtype=DT), torch.zeros(2, dtype=DT))
        assert all(torch.equal(a, b) for a, b in zip(before, kernel.parameters()))


def _same_physical_kernel(first_box: np.ndarray, box: np.ndarray) -> tuple[dict, dict]:
    """kernel_options for a model scaled on ``first_box`` and one scaled on ``box`` with the same length-scale in
    user units (0.5 and 0.7)."""
    physical = np.array([0.5, 0.7])
    half = lambda b: (b[1] - b[0]) / 2  # noqa: E731
    return (
        {"lengthscale": torch.tensor(physical / half(first_box), dtype=DT)},
        {"lengthscale": torch.tensor(physical / half(box), dtype=DT)},
    )


@pytest.mark.parametrize("name", ["exact", "poam"])
def test_widening_with_a_stationary_kernel_equals_the_wider_range_given_from_the_start(name):
    """With θ frozen, a model that widened its scaling at each batch predicts what one given the final range as
    ``x_bounds`` from the start predicts (the same kernel in user units): the widening is exact. (POAM with room for
    every point, so that its projections drop nothing: a widening forms the terms again from all data.)"""
    batches = list(corner_stream(n_batches=5, size=30))
    X = np.concatenate([x for x, _ in batches])
    first_box = np.stack([batches[0][0].min(0), batches[0][0].max(0)])
    box = np.stack([X.min(0), X.max(0)])
    follows, given = _same_physical_kernel(first_box, box)
    common = dict(kernel="rbf", training={"steps": 0}, noise=0.01)
    if name == "poam":
        common["num_inducing"] = 200
    fixed = make_model(name, **common, kernel_options=given, x_bounds=box, y_stats=(0.0, 1.0))
    widened = make_model(name, **common, kernel_options=follows, y_stats=(0.0, 1.0))
    for x, y in batches:
        widened.update(x, y)
        fixed.update(x, y)
    assert torch.allclose(widened.scaler.x_half_range, torch.as_tensor((box[1] - box[0]) / 2))
    grid = np.random.default_rng(1).uniform(box[0], box[1], (200, 2))
    a, b = widened.predict(grid), fixed.predict(grid)
    torch.testing.assert_close(a.mean, b.mean, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(a.var_f, b.var_f, rtol=1e-6, atol=1e-7)


def test_poam_streamed_from_a_corner_maps_as_well_as_with_hindsight_bounds():
    batches = list(corner_stream())
    X = np.concatenate([x for x, _ in batches])
    box = np.stack([X.min(0), X.max(0)])
    grid = np.random.default_rng(2).uniform(box[0], box[1], (400, 2))
    truth = np.sin(grid[:, 0] / 8) + np.cos(grid[:, 1] / 6)
    scores = {}
    for label, options in (("streamed", {}), ("hindsight", {"x_bounds": box})):
        model = make_model("poam", num_inducing=120, **options)
        reports = [model.update(x, y) for x, y in batches]
        assert all("outside" not in w for r in reports for w in r.warnings)
        scores[label] = smse(truth, model.predict(grid).mean.numpy())
    assert scores["hindsight"] < 0.05
    assert scores["streamed"] < 1.5 * scores["hindsight"] + 0.01, scores


def test_a_model_that_cannot_follow_refuses_a_batch_far_outside_and_is_unchanged():
    model = make_model("osgpr", num_inducing=20, training={"steps": 0})
    batches = corner_stream()
    model.update(*next(batches))
    state = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in model.state_dict().items()}
    far, y = next(iter(list(batches)[-1:]))
    with pytest.raises(ValueError, match="OSGPR refuses this batch.*x_bounds"):
        model.update(far, y)
    after = model.state_dict()
    assert all(torch.equal(v, after[k]) for k, v in state.items() if isinstance(v, torch.Tensor))
    assert model.num_updates == 1


def test_first_batch_bounds_freeze_the_scaling_as_before():
    """``x_bounds='first-batch'``: the first batch's range, frozen (the POAM paper's code): far inputs are warned
    about, never widened or refused, and the option survives ``options()``."""
    model = make_model("poam", num_inducing=30, training={"steps": 0}, x_bounds="first-batch")
    batches = list(corner_stream(n_batches=3))
    model.update(*batches[0])
    half = model.scaler.x_half_range.clone()
    report = model.update(*batches[-1])
    assert torch.equal(model.scaler.x_half_range, half)
    assert any("outside the frozen range" in w for w in report.warnings)
    assert model.options()["x_bounds"] == "first-batch"
    assert make_model("poam").options()["x_bounds"] is None
    with pytest.raises(ValueError, match="first-batch"):
        make_model("poam", x_bounds="first")
