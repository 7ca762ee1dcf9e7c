"""WISKI against dense SKI computations (W K_UU Wᵀ + D), both algebras (Kronecker and the dense reference), cache
updates, Lanczos, the paper's set-up, checkpoints, classification."""

import copy
import math

import pytest
import torch

from onlinegp.kronecker import GridFactors, grid_marginal, kron_congruence, kron_dense, kron_matmul
from onlinegp.linalg import CholeskyError
from onlinegp.models.registry import make_model
from onlinegp.models.wiski import SETTLED, WISKI, CubicGrid, InputProjection, WISKIClassifier
from onlinegp.posterior import kuu
from onlinegp.testing import state_equal
from onlinegp.training import Pretraining, Training

D = torch.float64
BOUNDS2 = [[-1.0, -1.0], [1.0, 1.0]]
ALGEBRAS = ["kronecker", "dense"]


#: the tests below check exactness update by update: the first batch takes ``num_steps`` steps like every other
def steps(n: int | None = None, **fields) -> dict:
    """WISKI's ``training`` option: ``n`` steps per update and no pre-training (and any other ``fields``)."""
    return {"training": Training(steps=n, pretrain=Pretraining(steps=0), **fields)}


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


@pytest.mark.parametrize("algebra", ALGEBRAS)
@pytest.mark.parametrize("num_steps", [0, 1])
def test_matches_dense_ski_after_single_and_batch_updates(num_steps, algebra):
    X, y = toy()
    Xs = torch.rand(7, 2, dtype=D, generator=torch.Generator().manual_seed(5)) * 2.2 - 1.1
    model = WISKI(2, grid_size=10, algebra=algebra, x_bounds=BOUNDS2, y_stats=(0.0, 1.0), **steps(num_steps))
    assert model.algebra == algebra
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
    model = WISKI(2, grid_size=9, x_bounds=BOUNDS2, y_stats=(0.0, 1.0), **steps(1))
    n = stream(model, X, y)
    W = model.grid.dense(X[:n])
    assert torch.allclose(model.WtW, W.T @ W, atol=1e-12)
    assert torch.allclose(model.Wty, W.T @ y[:n], atol=1e-12)
    assert math.isclose(float(model.yty), float(y[:n] @ y[:n]), rel_tol=1e-12)
    batch = WISKI(2, grid_size=9, x_bounds=BOUNDS2, y_stats=(0.0, 1.0), **steps(0))
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
        WISKI(2, grid_size=7, root=root, algebra="dense", x_bounds=BOUNDS2, y_stats=(0.0, 1.0), **steps(1))
        for root in ("cholesky", "lanczos")
    ]
    for m in models:
        stream(m, X, y, pattern=(20, 1, 1, 5))
    a, b = (m.predict(Xs, full_cov=True) for m in models)
    assert_close(b.mean, a.mean)
    assert_close(b.cov_f, a.cov_f)
    assert_close(models[1].log_marginal_likelihood(), models[0].log_marginal_likelihood())
    low = WISKI(2, grid_size=7, root="lanczos", rank=30, x_bounds=BOUNDS2, y_stats=(0.0, 1.0), **steps(1))
    stream(low, X, y, pattern=(20, 1, 1, 5))
    pred = low.predict(Xs)
    assert low.predictive_caches()[0].shape == (49, 30) and bool(torch.isfinite(pred.mean).all())
    assert float((pred.mean - a.mean).abs().max()) < 0.3


@pytest.mark.parametrize("algebra", ALGEBRAS)
def test_fixed_noise_matches_dense(algebra):
    X, y = toy(40)
    noise = 0.05 + torch.rand(40, dtype=D, generator=torch.Generator().manual_seed(2))
    Xs = torch.rand(5, 2, dtype=D) * 2 - 1
    model = WISKI(2, grid_size=8, fixed_noise=True, algebra=algebra, x_bounds=BOUNDS2, y_stats=(0.0, 1.0), **steps(1))
    n = stream(model, X, y, pattern=(15, 1, 1, 4), noise=noise)
    pred = model.predict(Xs, full_cov=True)
    mean, cov, mll = dense_ski(model, X[:n], y[:n], Xs, noise=noise[:n])
    assert_close(pred.mean, mean)
    assert_close(pred.cov_f, cov)
    assert_close(pred.var_y, pred.var_f)
    assert_close(model.log_marginal_likelihood(), mll)


@pytest.mark.parametrize("algebra", ALGEBRAS)
def test_projection_for_high_dimensional_inputs(algebra):
    X, y = toy(60, dim=5)
    model = WISKI(5, grid_size=12, algebra=algebra, x_bounds=[[-1.0] * 5, [1.0] * 5], y_stats=(0.0, 1.0), **steps(2))
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
    # the predictions are those of dense SKI over the stored features
    Kuu = kuu(model.kernel, model.U).detach()
    Ws = model.grid.dense(model.features(X[40:50]).detach())
    K = W @ Kuu @ W.T + model.noise.detach() * torch.eye(31, dtype=D)
    assert_close(pred.mean, Ws @ Kuu @ W.T @ torch.linalg.solve(K, torch.cat([y[:30], y[30:31]])))


def test_checkpoint_round_trip_and_resume():
    X, y = toy(40, dim=5)
    kw = dict(grid_size=8, training=Training(steps=1, pretrain=Pretraining(steps=5)), x_bounds=[[-1.0] * 5, [1.0] * 5])
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
    model = WISKI(2, grid_size=8, training=Training(steps=1))
    model.update(X[:20], y[:20])
    before = snapshot(model)
    with pytest.raises(ValueError):
        model.update(X[20:23], y[20:23], noise=torch.ones(3))
    assert state_equal(before, model.state_dict())


def test_per_point_noise_is_an_update_argument_in_data_units():
    """``update(x, y, noise=...)`` takes each row's noise variance in the data's units: scaling y and the noise
    together (by a power of two, so every division is exact) gives the same model bit for bit."""
    X, y = toy(40)
    noise = 0.05 + torch.rand(40, dtype=D, generator=torch.Generator().manual_seed(3))
    opts = dict(
        grid_size=8, training=Training(steps=1, pretrain=Pretraining(steps=3)), fixed_noise=True, x_bounds=BOUNDS2
    )
    data_units = WISKI(2, y_stats=(0.0, 2.0), **opts)
    scaled = WISKI(2, y_stats=(0.0, 1.0), **opts)
    assert data_units.takes_noise and not WISKI(2).takes_noise
    for i, j in ((0, 25), (25, 26), (26, 40)):
        data_units.update(X[i:j], 2 * y[i:j], noise=4 * noise[i:j])
        scaled.update(X[i:j], y[i:j], noise=noise[i:j])
    assert torch.equal(data_units.logdet_noise, scaled.logdet_noise) and torch.equal(data_units.WtW, scaled.WtW)
    a, b = data_units.predict(X), scaled.predict(X)
    assert torch.equal(a.mean, 2 * b.mean) and torch.equal(a.var_f, 4 * b.var_f)


@pytest.mark.parametrize(
    "bad, match",
    [
        (torch.ones(4), "x has 3 rows but noise has 4"),
        (torch.ones(3, 2), "noise must be 1-D"),
        (torch.tensor([0.1, -0.2, 0.1]), "must be positive"),
        (torch.tensor([0.1, 0.0, 0.1]), "must be positive"),
        (torch.tensor([0.1, float("nan"), 0.1]), "NaN or inf"),
        (torch.tensor([0.1, float("inf"), 0.1]), "NaN or inf"),
        ("loud", "noise must be numeric"),
        (None, "needs per-point noise"),
    ],
)
def test_bad_noise_is_refused_before_the_model_changes(bad, match, snapshot):
    X, y = toy(30)
    model = WISKI(2, grid_size=8, fixed_noise=True, **steps(1))
    model.update(X[:20], y[:20], noise=torch.full((20,), 0.1))
    before = snapshot(model)
    with pytest.raises(ValueError, match=match):
        model.update(X[20:23], y[20:23], noise=bad)
    assert state_equal(before, model.state_dict()) and model.num_updates == 1
    fresh = WISKI(grid_size=8, fixed_noise=True)  # the width comes from the first batch
    with pytest.raises(ValueError, match=match):  # a refused first batch leaves no input width behind
        fresh.update(X[20:23], y[20:23], noise=bad)
    assert fresh.input_dim is None and fresh.num_updates == 0 and fresh.num_data == 0


@pytest.mark.parametrize("name", ["wiski", "osgpr", "poam", "exact"])
def test_models_without_a_fixed_noise_likelihood_refuse_noise_by_name(name, snapshot):
    X, y = toy(30)
    model = make_model(name, 2, num_steps=1)
    assert not model.takes_noise
    model.update(X[:20], y[:20])
    before = snapshot(model)
    with pytest.raises(ValueError, match=f"{type(model).__name__} takes no per-point noise"):
        model.update(X[20:23], y[20:23], noise=torch.ones(3))
    assert state_equal(before, model.state_dict()) and model.num_updates == 1


def test_constructor_validation_and_registry():
    with pytest.raises(ValueError):
        WISKI(2, root="svd")
    with pytest.raises(ValueError):
        WISKI(2, grid_size=3)
    with pytest.raises(ValueError):
        WISKI(2, grid_size=[8, 8, 8])
    with pytest.raises(ValueError):
        WISKI(2, grid_size=8, root="lanczos", rank=65)
    with pytest.raises(ValueError):
        WISKI(2, algebra="toeplitz")
    with pytest.raises(ValueError):
        WISKI(2, algebra="kronecker", root="lanczos")
    with pytest.raises(ValueError):
        WISKI(2, algebra="kronecker", kernel="matern52")
    assert WISKI(2, kernel="matern52").algebra == "dense" and WISKI(2).algebra == "kronecker"
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
    training = Training(steps=1, pretrain=Pretraining(steps=20))
    clf = WISKIClassifier(2, 3, grid_size=10, training=training, x_bounds=[[-2.5, -2.5], [2.5, 2.5]])
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
    twin = WISKIClassifier(2, 3, grid_size=10, training=training, x_bounds=[[-2.5, -2.5], [2.5, 2.5]], seed=7)
    twin.load_state_dict(before)
    assert torch.equal(twin.predict_proba(X[100:]), clf.predict_proba(X[100:]))


# ---------------------------------------------------------------------------------------------- the Kronecker algebra
def test_kronecker_products_match_dense():
    g = torch.Generator().manual_seed(0)
    F = [torch.randn(k, k, dtype=D, generator=g) for k in (3, 5, 4)]
    Fd = kron_dense(F)
    assert torch.allclose(Fd, torch.kron(torch.kron(F[0], F[1]), F[2]))
    B = torch.randn(60, 7, dtype=D, generator=g)
    assert torch.allclose(kron_matmul(F, B), Fd @ B, atol=1e-12)
    assert torch.allclose(kron_matmul(F, B, transpose=True), Fd.T @ B, atol=1e-12)
    assert torch.allclose(kron_matmul(F, B[:, 0]), Fd @ B[:, 0], atol=1e-12)
    A = B @ B.T
    assert torch.allclose(kron_congruence(F, A), Fd.T @ A @ Fd, atol=1e-10)


def test_kronecker_factors_give_kuu_on_the_grid():
    model = WISKI(3, grid_size=[5, 6, 4], kernel_options={"lengthscale": 0.9}, x_bounds=[[-1.0] * 3, [1.0] * 3])
    with torch.no_grad():
        model.kernel.base_kernel.lengthscale = torch.tensor([[0.4, 0.7, 1.3]], dtype=D)
        model.kernel.outputscale = 2.5
    L = kron_dense(model.kuu_factors())
    assert torch.allclose(L @ L.T, kuu(model.kernel, model.U), rtol=1e-6, atol=1e-7)
    assert torch.equal(L, torch.tril(L))  # a Kronecker product of lower triangles is the Cholesky factor


def one_d(kind, diff, lengthscale):
    """A 1-D factor of the product kernel, written out: the RBF or the Matérn-5/2."""
    if kind == "rbf":
        return torch.exp(-0.5 * diff.square() / lengthscale**2)
    z = math.sqrt(5) * diff.abs() / lengthscale
    return (1 + z + z * z / 3) * torch.exp(-z)


@pytest.mark.parametrize("sizes", [[3, 5, 4], [6, 7], [9]])
@pytest.mark.parametrize("learnt_noise", [True, False])
@pytest.mark.parametrize("kind", ["rbf", "matern52"])
def test_grid_marginal_value_and_gradient_match_dense_autograd(sizes, learnt_noise, kind):
    """SKI's log marginal likelihood on a grid, and its gradient in the length-scales, output scale, noise, A and c,
    against autograd through the same formula computed densely: K_UU = ⊗_d K_d formed, its dense Cholesky root L,
    Q = I + s Lᵀ A L, a dense log-determinant and a dense solve. The Matérn case shares one length-scale."""
    g = torch.Generator().manual_seed(len(sizes))
    m = math.prod(sizes)
    axes = [torch.linspace(-1.2, 1.2, k, dtype=D) for k in sizes]
    grid = GridFactors(axes, jitter=1e-8, kind=kind)
    B = torch.randn(m, m // 2, dtype=D, generator=g)  # A of rank m/2, as WᵀW of few points
    A, c = B @ B.T / m, torch.randn(m, dtype=D, generator=g)
    yy, logdet_noise, n = torch.tensor(3.7, dtype=D), torch.tensor(-1.3, dtype=D), 40
    lengthscale = torch.linspace(0.4, 0.9, len(sizes), dtype=D).reshape(1, -1)
    theta = [lengthscale if kind == "rbf" else torch.full((1, 1), 0.7, dtype=D), torch.tensor(1.6, dtype=D)]
    theta.append(torch.tensor(0.2, dtype=D) if learnt_noise else None)
    leaves = [[None if t is None else t.clone().requires_grad_(True) for t in (*theta, A, c)] for _ in range(2)]
    ls, os_, noise, A1, c1 = leaves[0]
    mll, LQ, b, *roots = grid_marginal(grid, ls, os_, noise, A1, c1, yy, logdet_noise, n)
    wrt = [t for t in leaves[0] if t is not None]
    fast = torch.autograd.grad(mll, wrt)
    ls, os_, noise, A2, c2 = leaves[1]
    factors = []
    for d, axis in enumerate(axes):
        K = one_d(kind, axis[:, None] - axis[None, :], ls[0, d if kind == "rbf" else 0])
        scale = os_ if d == 0 else torch.ones((), dtype=D)
        factors.append(K * scale + 1e-8 * scale.detach() * torch.eye(len(axis), dtype=D))
    L = torch.linalg.cholesky(kron_dense(factors))
    s = torch.ones((), dtype=D) if noise is None else 1 / noise
    Q = torch.eye(m, dtype=D) + s * L.T @ A2 @ L
    ref_b = s * L.T @ c2
    data_fit = s * yy + (logdet_noise if noise is None else n * noise.log())
    ref = -0.5 * (data_fit - ref_b @ torch.linalg.solve(Q, ref_b) + torch.logdet(Q) + n * math.log(2 * math.pi))
    slow = torch.autograd.grad(ref, [t for t in leaves[1] if t is not None])
    assert math.isclose(mll.item(), ref.item(), rel_tol=1e-11)
    assert torch.allclose(LQ @ LQ.T, Q.detach()) and torch.equal(LQ, LQ.tril())
    assert torch.allclose(b, ref_b.detach(), atol=1e-12)
    assert torch.allclose(kron_dense(roots), L.detach(), atol=1e-12)
    for got, want in zip(fast, slow, strict=True):
        assert_close(got, want, tol=1e-9)


def test_grid_marginal_rejects_an_indefinite_a():
    grid = GridFactors([torch.linspace(-1, 1, 3, dtype=D), torch.linspace(-1, 1, 2, dtype=D)], jitter=1e-8)
    one = torch.ones((), dtype=D)
    with pytest.raises(CholeskyError, match="positive semi-definite"):
        grid_marginal(
            grid, torch.ones(1, 2, dtype=D), one, one, -50 * torch.eye(6, dtype=D), torch.ones(6, dtype=D), one, one, 6
        )


@pytest.mark.parametrize("dim,grid", [(2, 9), (3, 5)])
def test_kronecker_marginal_likelihood_and_gradient_equal_dense(dim, grid):
    X, y = toy(70, dim=dim)
    models = [
        WISKI(
            dim,
            grid_size=grid,
            algebra=a,
            x_bounds=[[-1.0] * dim, [1.0] * dim],
            y_stats=(0.0, 1.0),
            **steps(0),
        )
        for a in ALGEBRAS
    ]
    grads = []
    for model in models:
        with torch.no_grad():
            model.kernel.base_kernel.lengthscale = torch.linspace(0.4, 0.8, dim, dtype=D)
        model.update(X, y)
        mll = model._posterior(model.WtW, model.Wty, model.yty, model.logdet_noise, model.num_data, False).mll
        params = [model.kernel.raw_outputscale, model.kernel.base_kernel.raw_lengthscale, model.likelihood.raw_noise]
        grads.append((mll.item(), torch.cat([g.reshape(-1) for g in torch.autograd.grad(mll, params)])))
    assert math.isclose(grads[0][0], grads[1][0], rel_tol=1e-7)
    assert_close(grads[0][1], grads[1][1])
    assert math.isclose(grads[0][0], dense_ski(models[1], X, y, X[:2])[2], rel_tol=1e-7)


@pytest.mark.parametrize("algebra", ALGEBRAS)
def test_product_matern_on_the_grid_matches_dense_ski_and_learns_like_the_dense_algebra(algebra):
    """kernel='matern52-product' runs on the Kronecker algebra by default; its posterior is dense SKI's with gpytorch's
    ProductMatern52Kernel as K_UU, and its steps (the written-out length-scale gradient) follow the dense
    algebra's autograd."""
    X, y = toy(60)
    kw = dict(grid_size=9, kernel="matern52-product", x_bounds=BOUNDS2, y_stats=(0.0, 1.0), **steps(1))
    model, reference = WISKI(2, algebra=algebra, **kw), WISKI(2, algebra="dense", **kw)
    assert WISKI(2, kernel="matern52-product").algebra == "kronecker"
    n = 0
    for b in (20, 1, 1, 4, 1):
        for m in (model, reference):
            m.update(X[n : n + b], y[n : n + b])
        n += b
        pred = model.predict(X[40:], full_cov=True)
        mean, cov, mll = dense_ski(model, X[:n], y[:n], X[40:])
        assert_close(pred.mean, mean)
        assert_close(pred.cov_f, cov)
        assert_close(model.log_marginal_likelihood(), mll)
    for a, b in zip(model.parameters(), reference.parameters(), strict=True):
        assert_close(a.detach(), b.detach(), tol=1e-7)


def test_kernel_priors_join_the_objective():
    """A sharp Gamma prior on the length-scale holds it near the prior's mode through L-BFGS fits."""
    from gpytorch.priors import GammaPrior

    from onlinegp.kernels import make_kernel

    X, y = toy(80)
    fitted = []
    for prior in (None, GammaPrior(2000.0, 2000.0 / 0.3)):
        kernel = make_kernel("matern52-product", 2, lengthscale_prior=prior, lengthscale=0.5)
        model = WISKI(2, grid_size=10, kernel=kernel, x_bounds=BOUNDS2, y_stats=(0.0, 1.0), **steps(optimizer="lbfgs"))
        model.update(X, y)
        fitted.append(float(model.kernel.base_kernel.lengthscale.detach()))
    assert abs(fitted[1] - 0.3) < 0.01 and abs(fitted[0] - 0.3) > 0.05


def test_prediction_caches_rebuilt_lazily_and_on_parameter_change():
    X, y = toy(40)
    model = WISKI(2, grid_size=8, x_bounds=BOUNDS2, y_stats=(0.0, 1.0), **steps(1))
    model.update(X[:29], y[:29])  # the health check's fit to a batch of 10 or more points builds R
    model.update(X[29:30], y[29:30])
    assert model._cache is None  # a one-point update does not build R
    R1, _ = model.predictive_caches()
    assert model.predictive_caches()[0] is R1  # built once, reused
    with torch.no_grad():
        model.kernel.base_kernel.lengthscale = torch.tensor([[0.5, 0.5]], dtype=D)
    pred = model.predict(X[30:])
    mean, _, _ = dense_ski(model, X[:30], y[:30], X[30:])
    assert_close(pred.mean, mean)
    model.update(X[30:31], y[30:31])
    assert model._cache is None


def test_default_steps_one_per_point():
    """Every point takes one Adam step (Algorithm 1), in a batch of B too (B steps, with ``tolerance=0``), the first
    batch its pre-training steps on a fresh Adam; ``num_steps`` overrides."""
    X, y = toy(200)
    model = WISKI(
        2,
        grid_size=6,
        training=Training(tolerance=0.0, pretrain=Pretraining(steps=3)),
        x_bounds=BOUNDS2,
        y_stats=(0.0, 1.0),
    )

    def online_steps() -> set[int]:
        return {int(s["step"]) for s in model.optimizer.state.values()} or {0}

    model.update(X[:40], y[:40])  # a first batch of MIN_FIT_POINTS: pre-trained on at once
    assert online_steps() == {0}
    for i in range(40, 45):
        model.update(X[i : i + 1], y[i : i + 1])
    assert online_steps() == {5}
    model.update(X[45:145], y[45:145])
    assert online_steps() == {5 + 100}
    model.update(X[145:155], y[145:155])
    assert online_steps() == {105 + 10}
    model.num_steps = 2
    model.update(X[155:195], y[155:195])
    assert online_steps() == {115 + 2}


def test_batch_steps_stop_once_settled():
    """By default a batch of B takes up to B steps and stops once the objective per point has settled: on two large
    2-D batches after pre-training a fifth fewer at least, and the predictions stay within a small fraction
    of the target's spread of the model that takes all B (``tolerance=0``); a batch that has not settled takes all
    B."""
    X, y = toy(1400)
    Xt = torch.rand(300, 2, dtype=D, generator=torch.Generator().manual_seed(5)) * 2 - 1

    def run(training: Training) -> tuple[WISKI, list[int]]:
        model = WISKI(2, grid_size=10, training=training, x_bounds=BOUNDS2, y_stats=(0.0, 1.0))
        model.update(X[:200], y[:200])
        counts = []
        for start in (200, 800):
            model.update(X[start : start + 600], y[start : start + 600])
            counts.append(max(int(s["step"]) for s in model.optimizer.state.values()))
        return model, [counts[0], counts[1] - counts[0]]

    settled, taken = run(Training())
    every, all_steps = run(Training(tolerance=0.0))
    assert all_steps == [600, 600] and sum(taken) < 0.8 * sum(all_steps)
    spread = float(y.std())
    assert float((settled.predict(Xt).mean - every.predict(Xt).mean).abs().max()) < 0.05 * spread
    _, never = run(Training(tolerance=1e-300))
    assert never == [600, 600]


def test_paper_setup_defaults():
    """Stanton et al. 2021, Table C.1 and the authors' feature map: rates, pre-training schedule, length-scale 0.693."""
    model = WISKI(5, x_bounds=[[-1.0] * 5, [1.0] * 5])
    assert model.training == Training(
        optimizer="adam",
        lr=5e-3,
        lr_network=5e-4,
        tolerance=SETTLED,  # ours: the paper's Algorithm 1 takes one point at a time
        pretrain=Pretraining(steps=200, lr=5e-2, lr_network=5e-3),
    )
    assert torch.allclose(model.kernel.base_kernel.lengthscale, torch.full((1, 2), 0.693, dtype=D))
    assert model.grid.size == 256 and model.algebra == "kronecker"
    proj = model.projection
    assert isinstance(proj, InputProjection) and proj.linear.bias is not None and not proj.norm.affine
    x = torch.randn(50, 5, dtype=D)
    z = proj.linear(x)
    h = proj(x, batch_stats=True)
    assert torch.allclose(h, torch.tanh((z - z.mean(0)) / (z.var(0, unbiased=False) + proj.norm.eps).sqrt() / 2))
    # the first batch takes 200 cosine-annealed steps: the learning rate ends at zero, the online optimiser is fresh
    X, y = toy(40, dim=5)
    steps = []
    model.training = model.training.updated(Training(pretrain=Pretraining(steps=7)))
    original = model._adam

    def spy(lr, lr_projection):
        adam = original(lr, lr_projection)
        steps.append(adam)
        return adam

    model._adam = spy
    model.update(X, y)
    assert len(steps) == 1 and [g["lr"] for g in steps[0].param_groups] == [0.0, 0.0]
    assert [g["initial_lr"] for g in steps[0].param_groups] == [5e-2, 5e-3]
    assert all(s["step"] == 7 for s in steps[0].state.values())
    assert len(model.optimizer.state) == 0
