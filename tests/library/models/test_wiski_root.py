"""WISKI with a rank-r root of WᵀW (Stanton et al. 2021, §4.2; ``wtw_rank``): exact against dense SKI wherever the
root is exact, the Gill update and the truncation against their linear algebra, checkpoints and validation."""

import copy
import math

import pytest
import torch

from onlinegp.models.wiski import WISKI, leading_root
from onlinegp.testing import state_equal
from tests.library.models.test_wiski import BOUNDS2, D, assert_close, dense_ski, steps, toy

ALGEBRAS = ["kronecker", "dense"]


def model_with(rank, update, algebra="kronecker", num_steps=1, **kw):
    return WISKI(
        2,
        grid_size=8,
        algebra=algebra,
        wtw_rank=rank,
        wtw_update=update,
        x_bounds=BOUNDS2,
        y_stats=(0.0, 1.0),
        **steps(num_steps),
        **kw,
    )


def rank_of(model, X):
    W = model.grid.dense(model.features(X).detach())
    return int(torch.linalg.matrix_rank(W.T @ W))


@pytest.mark.parametrize("algebra", ALGEBRAS)
@pytest.mark.parametrize("update", ["gill", "truncate"])
def test_root_of_full_rank_matches_dense_ski_after_every_update(algebra, update):
    """A first batch that touches the whole 8 x 8 grid makes the root full rank, so the Gill update is exact too."""
    X, y = toy(300)
    Xs = torch.rand(6, 2, dtype=D, generator=torch.Generator().manual_seed(4)) * 2.2 - 1.1
    model = model_with(64, update, algebra)
    n = 0
    for b in (250, 1, 1, 4, 1):
        model.update(X[n : n + b], y[n : n + b])
        n += b
        assert model.WtW is None and model.wtw_root.shape == (64, 64)
        pred = model.predict(Xs, full_cov=True)
        mean, cov, mll = dense_ski(model, X[:n], y[:n], Xs)
        assert_close(pred.mean, mean)
        assert_close(pred.cov_f, cov)
        assert_close(pred.var_f, cov.diagonal())
        assert_close(model.log_marginal_likelihood(), mll)


def test_gill_root_of_rank_m_from_a_small_first_batch_is_exact_to_the_jitter():
    """20 points leave most of WᵀW's null space: raised to the jitter it is kept in the root, so later points far from
    the first batch are still absorbed (the paper's r = m), and the model is dense SKI to the jitter's size."""
    X, y = toy(60)
    model = model_with(64, "gill")
    assert rank_of(model, X[:20]) < 64
    n = 0
    for b in (20, 1, 5, 1, 30):
        model.update(X[n : n + b], y[n : n + b])
        n += b
    mean, cov, mll = dense_ski(model, X[:n], y[:n], X[:6])
    pred = model.predict(X[:6], full_cov=True)
    assert_close(pred.mean, mean, tol=1e-5)
    assert_close(pred.cov_f, cov, tol=1e-5)
    assert_close(model.log_marginal_likelihood(), mll, tol=1e-5)


@pytest.mark.parametrize("algebra", ALGEBRAS)
def test_truncated_root_is_exact_while_the_rank_of_wtw_is_at_most_r(algebra):
    """Data in one corner touch few grid points: a root of that rank (far below m) is exact after every update."""
    X, y = toy(40)
    X = 0.3 * X - 0.5
    r = rank_of(model_with(64, "truncate"), X)
    assert r < 40
    model = model_with(r, "truncate", algebra)
    n = 0
    for b in (10, 1, 1, 3, 1, 10, 1):
        model.update(X[n : n + b], y[n : n + b])
        n += b
        assert model.wtw_root.shape[1] <= r
        mean, cov, mll = dense_ski(model, X[:n], y[:n], X[30:])
        pred = model.predict(X[30:], full_cov=True)
        assert_close(pred.mean, mean)
        assert_close(pred.cov_f, cov)
        assert_close(model.log_marginal_likelihood(), mll)


def test_truncated_terms_stay_those_of_a_dataset():
    """Truncating below rank(WᵀW), Wᵀy is projected onto the kept span with it, so [yᵀy, (Wᵀy)ᵀ; Wᵀy, L Lᵀ] stays a
    Gram matrix (of y and the projected W): Wᵀy in the root's span and (Wᵀy)ᵀ(L Lᵀ)⁺Wᵀy ≤ yᵀy, which makes
    yᵀ(W K Wᵀ + σ²I)⁻¹y positive; truncating WᵀW alone breaks both."""
    X, y = toy(120)
    model = model_with(20, "truncate", num_steps=0)
    assert rank_of(model, X) > 20
    n = 0
    for b in (30, 1, 5, 1, 40, 1):
        model.update(X[n : n + b], y[n : n + b])
        n += b
        L, c, yy = model.wtw_root, model.Wty, model.yty
        assert torch.allclose(L @ torch.linalg.lstsq(L, c).solution, c, atol=1e-8)
        assert float(c @ torch.linalg.pinv(L @ L.T) @ c) <= float(yy) + 1e-8
    W = model.grid.dense(X[:n])
    assert not torch.allclose(c, W.T @ y[:n], atol=1e-3)  # the projection did act
    assert math.isfinite(model.log_marginal_likelihood())


def test_truncation_keeps_the_leading_eigenspace():
    g = torch.Generator().manual_seed(0)
    L = torch.randn(30, 12, dtype=D, generator=g)
    root, inv_root = leading_root(L, 5)
    lam, U = torch.linalg.eigh(L @ L.T)
    best = (U[:, -5:] * lam[-5:]) @ U[:, -5:].T
    assert root.shape == (30, 5) and torch.allclose(root @ root.T, best, atol=1e-10)
    assert torch.allclose(root.T @ inv_root, torch.eye(5, dtype=D), atol=1e-10)
    # more columns than rows: the same from L Lᵀ
    wide = torch.randn(6, 20, dtype=D, generator=g)
    root, _ = leading_root(wide, 6)
    assert torch.allclose(root @ root.T, wide @ wide.T, atol=1e-10)
    # round-off eigenvalues are dropped: a rank-3 root of a rank-3 matrix, even when asked for more
    low = torch.randn(30, 3, dtype=D, generator=g) @ torch.randn(3, 8, dtype=D, generator=g)
    root, _ = leading_root(low, 8)
    assert root.shape == (30, 3) and torch.allclose(root @ root.T, low @ low.T, atol=1e-10)


def test_gill_update_adds_the_part_of_w_inside_the_roots_span():
    """L Lᵀ after the update is A + (P w)(P w)ᵀ with P the projection onto the first batch's span, and J stays L's
    pseudo-inverse root: a point seen in the first batch is absorbed exactly, one far from it only in part."""
    X, y = toy(60)
    left = X[:, 0] < 0
    r = rank_of(model_with(64, "gill"), X[left][:20])  # no jitter directions: the span is the first batch's
    model = model_with(r, "gill", num_steps=0)
    model.update(X[left][:20], y[left][:20])
    L0 = model.wtw_root.clone()
    P = L0 @ torch.linalg.pinv(L0)
    seen, far = X[left][:1], X[~left][:1]
    for x_new in (seen, far):
        before = model.wtw_root @ model.wtw_root.T
        model.update(x_new, y[:1])
        w = model.grid.dense(x_new)[0]
        L, J = model.wtw_root, model.wtw_inv_root
        assert torch.allclose(L @ L.T, before + torch.outer(P @ w, P @ w), atol=1e-7)
        assert torch.allclose(L.T @ J, torch.eye(L.shape[1], dtype=D), atol=1e-8)
    w_seen, w_far = model.grid.dense(seen)[0], model.grid.dense(far)[0]
    assert torch.allclose(P @ w_seen, w_seen, atol=1e-10) and not torch.allclose(P @ w_far, w_far, atol=1e-3)


@pytest.mark.parametrize("update", ["gill", "truncate"])
def test_fixed_noise_root_matches_dense(update):
    X, y = toy(300)
    noise = 0.05 + torch.rand(300, dtype=D, generator=torch.Generator().manual_seed(2))
    model = model_with(64, update, fixed_noise=True)
    n = 0
    for b in (250, 1, 3):
        model.update(X[n : n + b], y[n : n + b], noise=noise[n : n + b])
        n += b
    pred = model.predict(X[:5], full_cov=True)
    mean, cov, mll = dense_ski(model, X[:n], y[:n], X[:5], noise=noise[:n])
    assert_close(pred.mean, mean)
    assert_close(pred.cov_f, cov)
    assert_close(model.log_marginal_likelihood(), mll)


def test_root_with_a_learnt_projection_follows_the_full_model():
    """With r = m and the truncating update the root is exact, so the projection and θ take the same steps."""
    X, y = toy(60, dim=5)
    kw = dict(grid_size=8, x_bounds=[[-1.0] * 5, [1.0] * 5], y_stats=(0.0, 1.0), **steps(2))
    full, rooted = WISKI(5, **kw), WISKI(5, wtw_rank=64, wtw_update="truncate", **kw)
    for m in (full, rooted):
        stream_points = ((0, 30), (30, 31), (31, 32), (32, 36))
        for a, b in stream_points:
            m.update(X[a:b], y[a:b])
    assert_close(rooted.projection.linear.weight.detach(), full.projection.linear.weight.detach())
    assert_close(rooted.predict(X[40:]).mean, full.predict(X[40:]).mean)
    assert_close(rooted.predict(X[40:]).var_f, full.predict(X[40:]).var_f)


def test_checkpoint_holds_the_root_not_wtw_and_resumes_exactly():
    X, y = toy(80)
    a = model_with(40, "truncate")
    a.update(X[:30], y[:30])
    a.update(X[30:31], y[30:31])
    state = copy.deepcopy(a.state_dict())
    dynamic = state["_extra_state"]["dynamic"]
    assert dynamic["WtW"] is None and dynamic["wtw_root"].shape[0] == 64 and dynamic["wtw_root"].shape[1] <= 40
    b = model_with(40, "truncate")
    b.load_state_dict(state)
    for m in (a, b):
        m.update(X[31:35], y[31:35])
        m.update(X[35:36], y[35:36])
    assert state_equal(a.state_dict(), b.state_dict())
    assert torch.equal(a.predict(X[40:]).mean, b.predict(X[40:]).mean)


def test_bad_batch_leaves_the_root_unchanged(snapshot):
    X, y = toy(30)
    model = model_with(30, "gill")
    model.update(X[:20], y[:20])
    before = snapshot(model)
    with pytest.raises(ValueError):
        model.update(X[20:23], y[20:22])
    assert state_equal(before, model.state_dict())


def test_root_options_are_validated():
    with pytest.raises(ValueError, match="wtw_rank"):
        WISKI(2, grid_size=8, wtw_rank=65)
    with pytest.raises(ValueError, match="wtw_rank"):
        WISKI(2, grid_size=8, wtw_rank=0)
    with pytest.raises(ValueError, match="wtw_update"):
        WISKI(2, grid_size=8, wtw_rank=8, wtw_update="lanczos")
    with pytest.raises(ValueError, match="root='cholesky'"):
        WISKI(2, grid_size=8, wtw_rank=8, root="lanczos", algebra="dense")
