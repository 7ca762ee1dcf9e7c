"""WISKI's per-observation step: the marginal likelihood and its gradient in every parameter under the Kronecker algebra
(:func:`onlinegp.kronecker.kron_logdet_quad`, partial traces of L_Q⁻¹) against the dense reference algebra (autograd
through dense Choleskies), for learnt and fixed noise and the learnt projection; whole streams of one-step updates; the
in-place absorption of a point when the step fails."""

import math

import pytest
import torch

from onlinegp.models.wiski import WISKI
from onlinegp.testing import state_equal
from onlinegp.training import Pretraining, Training

D = torch.float64
#: θ fixed, no pre-training
FROZEN = Training(steps=0, pretrain=Pretraining(steps=0))


def toy(n, dim, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, dim, dtype=D, generator=g) * 2 - 1
    y = torch.sin(3 * X[:, 0]) + X[:, -1] ** 2 + 0.1 * torch.randn(n, dtype=D, generator=g)
    return X, y


def pair(dim, grid, **options):
    """The same WISKI twice, Kronecker and dense algebra, with unequal length-scales per dimension."""
    models = [
        WISKI(dim, grid_size=grid, algebra=a, x_bounds=[[-1.0] * dim, [1.0] * dim], y_stats=(0.0, 1.0), **options)
        for a in ("kronecker", "dense")
    ]
    for model in models:
        with torch.no_grad():
            model.kernel.base_kernel.lengthscale = torch.linspace(0.3, 0.9, model.grid_dim, dtype=D)
            model.kernel.outputscale = 1.7
    return models


def objective_and_gradient(model, x, y, noise=None, batch_stats=False):
    """The objective of one step on the new batch (x, y) (the stored terms fixed, the new ones differentiable through
    the projection) and its gradient in every parameter, in a fixed order."""
    xs, ys = model.scaler.x(x), model.scaler.y(y)
    prec, logdet = None, model.logdet_noise
    if noise is not None:
        prec, logdet = 1.0 / noise, model.logdet_noise + noise.log().sum()
    terms = model._new_terms(xs, ys, prec, batch_stats)
    # support: the new points' grid indices (the Kronecker algebra forms A's gradient there only when few)
    mll = model._posterior(
        *terms[:3], logdet, model.num_data + x.shape[0], predictive=False, support=terms[4].unique()
    ).mll
    params = [p for _, p in sorted(model.named_parameters()) if p.requires_grad]
    grads = torch.autograd.grad(mll, params, allow_unused=True)
    flat = torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for p, g in zip(params, grads)])
    return mll.item(), flat


def assert_same(fast, dense, tol=1e-6):
    assert math.isclose(fast[0], dense[0], rel_tol=tol), (fast[0], dense[0])
    scale = max(1.0, float(dense[1].abs().max()))
    assert float((fast[1] - dense[1]).abs().max()) <= tol * scale, (fast[1], dense[1])


@pytest.mark.parametrize("dim,grid", [(1, 20), (2, 9), (2, [7, 9]), (3, 5)])
def test_learnt_noise_objective_and_gradient_equal_dense(dim, grid):
    X, y = toy(120, dim)
    results = []
    for model in pair(dim, grid, training=FROZEN):
        model.update(X[:100], y[:100])
        results.append([objective_and_gradient(model, X[100 + i : 101 + i], y[100 + i : 101 + i]) for i in range(3)])
        results[-1].append(objective_and_gradient(model, X[103:120], y[103:120]))
    for fast, dense in zip(*results):
        assert_same(fast, dense)
        assert float(fast[1].abs().min()) > 0  # every parameter has a gradient: none was left out


def test_fixed_noise_objective_and_gradient_equal_dense():
    X, y = toy(90, 2)
    noise = torch.linspace(0.05, 0.3, 90, dtype=D)
    results = []
    for model in pair(2, 8, training=FROZEN, fixed_noise=True):
        model.update(X[:80], y[:80], noise=noise[:80])
        results.append(objective_and_gradient(model, X[80:81], y[80:81], noise=noise[80:81]))
    assert_same(*results)


def test_projection_objective_and_gradient_equal_dense():
    """D > 3: the new points' interpolation weights depend on the projection, so A = WᵀW carries a gradient (the
    first batch through its batch-norm statistics as well)."""
    X, y = toy(50, 5)
    first, later = [], []
    for model in pair(5, 10, training=FROZEN):
        first.append(objective_and_gradient(model, X[:40], y[:40], batch_stats=True))
        model.update(X[:40], y[:40])
        later.append(objective_and_gradient(model, X[40:41], y[40:41]))
    assert_same(*first)
    assert_same(*later)
    assert float(later[0][1].abs().min()) > 0


@pytest.mark.parametrize("dim,grid,pretrain", [(2, 8, 0), (3, 5, 0), (5, 8, 3)])
def test_one_step_per_observation_streams_agree_with_dense(dim, grid, pretrain):
    """Algorithm 1 end to end: the parameters after each single-point update with its Adam step are those of the dense
    algebra (Adam's first steps are ±lr whatever the gradient's size, so a wrong sign or a lost term shows at once)."""
    X, y = toy(60, dim)
    models = pair(dim, grid, training=Training(pretrain=Pretraining(steps=pretrain)))
    for model in models:
        model.update(X[:40], y[:40])
    for i in range(40, 52):
        for model in models:
            model.update(X[i : i + 1], y[i : i + 1])
        params = [torch.cat([p.detach().reshape(-1) for _, p in sorted(m.named_parameters())]) for m in models]
        assert torch.allclose(params[0], params[1], rtol=1e-6, atol=1e-9), (i, params)
    assert torch.allclose(models[0].WtW, models[1].WtW, atol=1e-12)


def test_point_absorbed_in_place_is_undone_when_the_step_fails():
    X, y = toy(30, 2)
    model = WISKI(
        2, grid_size=8, training=Training(steps=1, pretrain=Pretraining(steps=0)), x_bounds=[[-1.0] * 2, [1.0] * 2]
    )
    model.update(X[:20], y[:20])
    before, WtW = model.state_dict(), model.WtW

    def fail():
        raise RuntimeError("step failed")

    model.optimizer.step = fail
    with pytest.raises(RuntimeError, match="step failed"):
        model.update(X[20:21], y[20:21])
    assert state_equal(model.state_dict(), before)
    assert not torch.equal(WtW, model.WtW)  # the live matrix took the point, in place; the restored copy did not


def test_lbfgs_fit_reaches_a_stationary_point_above_the_adam_steps():
    """fit='lbfgs' (the BO set-up of appendix C.2): after the update θ is at a stationary point of the marginal
    likelihood of all data, which is at least as high as the one the default Adam steps reach from the same start."""
    X, y = toy(80, 2)
    fitted = {}
    for fit in ("adam", "lbfgs"):
        training = Training(optimizer=fit, pretrain=Pretraining(steps=0))
        model = WISKI(2, grid_size=10, training=training, x_bounds=[[-1.0] * 2, [1.0] * 2], y_stats=(0.0, 1.0))
        model.update(X[:60], y[:60])
        model.update(X[60:], y[60:])
        fitted[fit] = model
    model = fitted["lbfgs"]
    mll = model._posterior(model.WtW, model.Wty, model.yty, model.logdet_noise, model.num_data, False).mll
    grads = torch.autograd.grad(mll / model.num_data, list(model.parameters()))
    assert max(float(g.abs().max()) for g in grads) < 1e-4
    assert model.log_marginal_likelihood() > fitted["adam"].log_marginal_likelihood() + 1.0
