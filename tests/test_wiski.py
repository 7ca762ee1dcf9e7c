"""WISKI against dense SKI computations (W K_UU Wᵀ + D), cache updates, Lanczos, checkpoints, classification."""

import copy
import math

import pytest
import torch
from conftest import state_equal

from onlinegp.models.registry import make_model
from onlinegp.models.wiski import WISKI, CubicGrid, WISKIClassifier
from onlinegp.posterior import kuu

D = torch.float64
BOUNDS2 = [[-1.0, -1.0], [1.0, 1.0]]


def toy(n=80, dim=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, dim, dtype=D, generator=g) * 2 - 1
    y = torch.sin(3 * X[:, 0]) + X[:, -1] ** 2 + 0.1 * torch.randn(n, dtype=D, generator=g)
    return X, y


def stream(model, X, y, pattern=(20, 1, 1, 1, 5, 1, 3, 1, 1), noise=None):
    """Feed (X, y) in single points and batches; returns how many rows were used."""
    i = 0
    for b in pattern:
        kw = {} if noise is None else {"noise": noise[i : i + b]}
        model.update(X[i : i + b], y[i : i + b], **kw)
        i += b
    return i


@torch.no_grad()
def dense_ski(model, X, y, Xs, noise=None):
    """The SKI GP with explicit matrices: K = W K_UU Wᵀ + D, predictive at Xs, log N(y | 0, K)."""
    Kuu = kuu(model.kernel, model.U)
    W, Ws = model.grid.dense(model.features(X)), model.grid.dense(model.features(Xs))
    Dn = torch.diag(noise) if noise is not None else model.noise * torch.eye(X.shape[0], dtype=D)
    K = W @ Kuu @ W.T + Dn
    Ksx = Ws @ Kuu @ W.T
    mean = Ksx @ torch.linalg.solve(K, y)
    cov = Ws @ Kuu @ Ws.T - Ksx @ torch.linalg.solve(K, Ksx.T)
    mll = torch.distributions.MultivariateNormal(torch.zeros_like(y), K).log_prob(y)
    return mean, cov, float(mll)


def assert_close(a, b, tol=1e-6):
    a, b = torch.as_tensor(a, dtype=D), torch.as_tensor(b, dtype=D)
    assert torch.allclose(a, b, rtol=tol, atol=tol * max(1.0, float(b.abs().max()))), float((a - b).abs().max())


@pytest.mark.parametrize("num_steps", [0, 1])
def test_matches_dense_ski_after_single_and_batch_updates(num_steps):
    X, y = toy()
    Xs = torch.rand(7, 2, dtype=D, generator=torch.Generator().manual_seed(5)) * 2.2 - 1.1
    model = WISKI(2, grid_size=10, num_steps=num_steps, x_bounds=BOUNDS2, y_stats=(0.0, 1.0))
    n = 0
    for b in (20, 1, 1, 4, 1, 3):
        model.update(X[n : n + b], y[n : n + b])
        n += b
        pred = model.predict(Xs, full_cov=True)
        mean, cov, mll = dense_ski(model, X[:n], y[:n], Xs)
        assert_close(pred.mean, mean)
        assert_close(pred.cov_f, cov)
        assert_close(pred.var_f, cov.diagonal())
        assert_close(pred.var_y, cov.diagonal() + model.noise.detach())
        assert_close(model.log_marginal_likelihood(), mll)


def test_caches_equal_recomputation_from_all_data():
    X, y = toy(60)
    model = WISKI(2, grid_size=9, num_steps=1, x_bounds=BOUNDS2, y_stats=(0.0, 1.0))
    n = stream(model, X, y)
    W = model.grid.dense(X[:n])
    assert torch.allclose(model.WtW, W.T @ W, atol=1e-12)
    assert torch.allclose(model.Wty, W.T @ y[:n], atol=1e-12)
    assert math.isclose(float(model.yty), float(y[:n] @ y[:n]), rel_tol=1e-12)
    batch = WISKI(2, grid_size=9, num_steps=0, x_bounds=BOUNDS2, y_stats=(0.0, 1.0))
    batch.update(X[:n], y[:n])
    assert torch.allclose(model.WtW, batch.WtW, atol=1e-12) and torch.allclose(model.Wty, batch.Wty, atol=1e-12)


def test_interpolation_weights():
    grid = CubicGrid([8, 6, 5], margin=0.1)
    x = torch.rand(50, 3, dtype=D, generator=torch.Generator().manual_seed(1)) * 2.2 - 1.1
    idx, val, clamped = grid.weights(x)
    assert idx.shape == (50, 64) and clamped == 0
    assert torch.allclose(val.sum(-1), torch.ones(50, dtype=D))
    U = grid.points()
    assert U.shape == (grid.size, 3) and bool((U.min(0).values < -1.1).all()) and bool((U.max(0).values > 1.1).all())
    # cubic convolution reproduces quadratics exactly away from the boundary
    f = lambda z: 1 + z[:, 0] - 2 * z[:, 1] ** 2 + z[:, 2] * z[:, 0]
    assert torch.allclose(grid.dense(x) @ f(U), f(x), atol=1e-10)
    _, _, clamped = grid.weights(torch.tensor([[2.0, 0.0, 0.0]], dtype=D))
    assert clamped == 1


def test_lanczos_full_rank_equals_cholesky():
    X, y = toy(50)
    Xs = torch.rand(6, 2, dtype=D, generator=torch.Generator().manual_seed(3)) * 2 - 1
    models = [
        WISKI(2, grid_size=7, num_steps=1, root=root, x_bounds=BOUNDS2, y_stats=(0.0, 1.0))
        for root in ("cholesky", "lanczos")
    ]
    for m in models:
        stream(m, X, y, pattern=(20, 1, 1, 5))
    a, b = (m.predict(Xs, full_cov=True) for m in models)
    assert_close(b.mean, a.mean)
    assert_close(b.cov_f, a.cov_f)
    assert_close(models[1].log_marginal_likelihood(), models[0].log_marginal_likelihood())
    low = WISKI(2, grid_size=7, num_steps=1, root="lanczos", rank=30, x_bounds=BOUNDS2, y_stats=(0.0, 1.0))
    stream(low, X, y, pattern=(20, 1, 1, 5))
    pred = low.predict(Xs)
    assert low.R.shape == (49, 30) and bool(torch.isfinite(pred.mean).all())
    assert float((pred.mean - a.mean).abs().max()) < 0.3


def test_fixed_noise_matches_dense():
    X, y = toy(40)
    noise = 0.05 + torch.rand(40, dtype=D, generator=torch.Generator().manual_seed(2))
    Xs = torch.rand(5, 2, dtype=D) * 2 - 1
    model = WISKI(2, grid_size=8, num_steps=1, fixed_noise=True, x_bounds=BOUNDS2, y_stats=(0.0, 1.0))
    n = stream(model, X, y, pattern=(15, 1, 1, 4), noise=noise)
    pred = model.predict(Xs, full_cov=True)
    mean, cov, mll = dense_ski(model, X[:n], y[:n], Xs, noise=noise[:n])
    assert_close(pred.mean, mean)
    assert_close(pred.cov_f, cov)
    assert_close(pred.var_y, pred.var_f)
    assert_close(model.log_marginal_likelihood(), mll)


def test_projection_for_high_dimensional_inputs():
    X, y = toy(60, dim=5)
    model = WISKI(5, grid_size=12, num_steps=2, x_bounds=[[-1.0] * 5, [1.0] * 5], y_stats=(0.0, 1.0))
    model.update(X[:30], y[:30])
    h_first = model.features(X[:30]).detach()
    assert bool((h_first.abs() < 1).all())
    w0 = model.projection.linear.weight.detach().clone()
    WtW_before = model.WtW.clone()
    model.update(X[30:31], y[30:31])
    assert not torch.equal(w0, model.projection.linear.weight.detach())
    # the new point was absorbed with the projection after its step; stored points were not re-projected
    w_new = model.grid.dense(model.features(X[30:31]).detach())
    assert torch.allclose(model.WtW - WtW_before, w_new.T @ w_new, atol=1e-12)
    # dense SKI over the stored features of the first batch (frozen at absorption) plus the new point
    H = torch.cat([h_first, model.features(X[30:31]).detach()])
    W = model.grid.dense(H)
    assert torch.allclose(model.WtW, W.T @ W, atol=1e-10)
    pred = model.predict(X[40:50])
    assert bool(torch.isfinite(pred.mean).all()) and bool((pred.var_f > 0).all())


def test_checkpoint_round_trip_and_resume():
    X, y = toy(40, dim=5)
    kw = dict(grid_size=8, num_steps=1, x_bounds=[[-1.0] * 5, [1.0] * 5])
    a = WISKI(5, **kw)
    stream(a, X, y, pattern=(20, 1, 1))
    b = WISKI(5, **kw)
    b.load_state_dict(copy.deepcopy(a.state_dict()))
    assert state_equal(a.state_dict(), b.state_dict())
    for m in (a, b):
        m.update(X[22:25], y[22:25])
        m.update(X[25:26], y[25:26])
    assert state_equal(a.state_dict(), b.state_dict())
    assert torch.equal(a.predict(X[30:]).mean, b.predict(X[30:]).mean)


def test_bad_input_rejected_and_model_unchanged(snapshot):
    X, y = toy(30)
    model = WISKI(2, grid_size=8, num_steps=1)
    model.update(X[:20], y[:20])
    before = snapshot(model)
    with pytest.raises(ValueError):
        model.update(X[20:23], y[20:23], noise=torch.ones(3))
    assert state_equal(before, model.state_dict())


def test_constructor_validation_and_registry():
    with pytest.raises(ValueError):
        WISKI(2, root="svd")
    with pytest.raises(ValueError):
        WISKI(2, grid_size=3)
    with pytest.raises(ValueError):
        WISKI(2, grid_size=[8, 8, 8])
    with pytest.raises(ValueError):
        WISKI(2, grid_size=8, root="lanczos", rank=65)
    fixed = WISKI(2, grid_size=8, fixed_noise=True)
    with pytest.raises(ValueError):
        fixed.update(torch.zeros(2, 2), torch.zeros(2))
    with pytest.raises(ValueError):
        fixed.update(torch.zeros(2, 2), torch.zeros(2), noise=[1.0, -1.0])
    model = make_model("wiski", 3, grid_size=6)
    assert isinstance(model, WISKI) and model.num_inducing == 216


def test_classifier_beats_chance_on_separable_blobs():
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 3, (150,), generator=g)
    centres = torch.tensor([[-1.0, -1.0], [1.0, -1.0], [0.0, 1.2]], dtype=D)
    X = centres[labels] + 0.3 * torch.randn(150, 2, dtype=D, generator=g)
    clf = WISKIClassifier(2, 3, grid_size=10, num_steps=1, x_bounds=[[-2.5, -2.5], [2.5, 2.5]])
    clf.update(X[:20], labels[:20])
    for i in range(20, 60):
        clf.update(X[i : i + 1], labels[i : i + 1])
    clf.update(X[60:100], labels[60:100])
    proba = clf.predict_proba(X[100:])
    assert proba.shape == (50, 3) and torch.allclose(proba.sum(-1), torch.ones(50, dtype=D))
    acc = float((clf.predict(X[100:]) == labels[100:]).double().mean())
    assert acc > 0.9
    assert float((proba.argmax(-1) == labels[100:]).double().mean()) > 0.9
    before = copy.deepcopy(clf.state_dict())
    with pytest.raises(ValueError):
        clf.update(X[:2], torch.tensor([0, 3]))
    assert state_equal(before, clf.state_dict())
    twin = WISKIClassifier(2, 3, grid_size=10, num_steps=1, x_bounds=[[-2.5, -2.5], [2.5, 2.5]], seed=7)
    twin.load_state_dict(before)
    assert torch.equal(twin.predict_proba(X[100:]), clf.predict_proba(X[100:]))
