"""POAM, PAM, FULL, OVC against batch SGPR (Titsias) computed densely (the shared protocol: test_conformance.py)."""

import numpy as np
import pytest
import torch

from onlinegp import FULL, OVC, PAM, POAM, ExactGP, OVCpp
from onlinegp.inducing import Fixed
from onlinegp.kernels import dense, diagonal
from onlinegp.models.registry import make_model
from onlinegp.objectives import sgpr_bound
from onlinegp.posterior import InducingPosterior, kuu
from onlinegp.testing import toy
from onlinegp.training import Training
from tests.reference import D, dense_sgpr


def fixed_model(cls, Z_scaled, seed=0, **kw):
    model = cls(
        2,
        inducing=Fixed(Z_scaled),
        training=Training(steps=0),
        kernel="rbf",
        noise=0.05,
        x_bounds=[[-2, -2], [2, 2]],
        y_stats=(0.0, 1.0),
        seed=seed,
        **kw,
    )
    return model


@torch.no_grad()
def test_root_form_posterior_equals_dense_titsias():
    X, y = toy(120)
    model = fixed_model(POAM, X[:15].clone() / 2)
    kernel, noise = model.kernel, model.noise
    Z = X[:15] / 2
    Kzx = dense(kernel, Z, X / 2)
    post = InducingPosterior.from_terms(kernel, Z, Kzx @ y / noise, Kzx @ Kzx.T / noise)
    m, S, _, _ = dense_sgpr(kernel, noise, Z, X / 2, y, X[:3] / 2)
    assert torch.allclose(post.mean, m, rtol=1e-8, atol=1e-9)
    R = post.root
    assert torch.allclose(R @ R.T, S, rtol=1e-7, atol=1e-10)
    assert torch.allclose(post.logdet_cov, torch.linalg.slogdet(S)[1], rtol=1e-8)


@pytest.mark.parametrize("cls", [POAM, OVC, OVCpp, FULL])
@pytest.mark.parametrize("split_seed", [0, 1])
@torch.no_grad()
def test_online_equals_batch_sgpr_with_fixed_z_and_theta(cls, split_seed):
    X, y = toy(300)
    Xs = torch.rand(50, 2, dtype=D) * 4 - 2
    Z = X[torch.randperm(300, generator=torch.Generator().manual_seed(5))[:40]] / 2  # scaled units
    kw = {"optimize_inducing": False} if cls is OVC else {}
    model = fixed_model(cls, Z, **kw)
    cuts = sorted(np.random.default_rng(split_seed).choice(np.arange(1, 300), size=6, replace=False).tolist())
    for lo, hi in zip([0] + cuts, cuts + [300]):
        model.update(X[lo:hi], y[lo:hi])
    pred = model.predict(Xs)
    _, _, mean, var = dense_sgpr(model.kernel, model.noise, Z, X / 2, y, Xs / 2)
    assert torch.allclose(pred.mean, mean, rtol=1e-8, atol=1e-8)
    assert torch.allclose(pred.var_f, var, rtol=1e-8, atol=1e-8)
    assert torch.allclose(pred.var_y, var + model.noise, rtol=1e-8, atol=1e-8)


@torch.no_grad()
def test_pam_equals_sgpr():
    X, y = toy(200)
    Z = X[:30] / 2
    model = fixed_model(PAM, Z)
    for lo in range(0, 200, 64):
        model.update(X[lo : lo + 64], y[lo : lo + 64])
    pred = model.predict(X[:20], full_cov=True)
    _, _, mean, var = dense_sgpr(model.kernel, model.noise, Z, X / 2, y, X[:20] / 2)
    assert torch.allclose(pred.mean, mean, rtol=1e-8, atol=1e-8)
    assert torch.allclose(pred.cov_f.diagonal(), var, rtol=1e-8, atol=1e-8)


@torch.no_grad()
def test_projection_through_changing_inducing_sets_is_exact_when_data_lie_in_span():
    """With Z = all inputs seen so far (pivoted Cholesky keeps everything), online terms are exact."""
    X, y = toy(60)
    model = POAM(
        2,
        num_inducing=1000,
        training=Training(steps=0),
        kernel="rbf",
        noise=0.05,
        x_bounds=[[-2, -2], [2, 2]],
        y_stats=(0.0, 1.0),
    )
    for lo in range(0, 60, 20):
        model.update(X[lo : lo + 20], y[lo : lo + 20])
    Z = model.Z
    assert Z.shape[0] == 60
    _, _, mean, var = dense_sgpr(model.kernel, model.noise, Z, X / 2, y, X[:10] / 2)
    pred = model.predict(X[:10])
    assert torch.allclose(pred.mean, mean, rtol=1e-6, atol=1e-6)


def test_sgpr_bound_matches_dense_formula():
    X, y = toy(80)
    model = fixed_model(POAM, X[:10])
    k, noise = model.kernel, model.noise
    with torch.no_grad():
        Z = X[:10]
        Kuu = kuu(k, Z)
        Kuf = dense(k, Z, X)
        Q = Kuf.T @ torch.linalg.solve(Kuu, Kuf)
        C = Q + noise * torch.eye(80, dtype=D)
        ref = torch.distributions.MultivariateNormal(torch.zeros(80, dtype=D), C).log_prob(y)
        ref = ref - (diagonal(k, X).sum() - Q.trace()) / (2 * noise)
        assert torch.allclose(sgpr_bound(k, noise, Z, X, y), ref, rtol=1e-9)


def test_poam_learns_and_predicts_reasonably():
    X, y = toy(600, seed=3)
    model = POAM(2, num_inducing=80, seed=0)
    for lo in range(0, 600, 100):
        report = model.update(X[lo : lo + 100], y[lo : lo + 100])
    assert report.num_inducing == 80 and report.num_data == 600
    assert set(report.timings) >= {"inducing+variational", "hyperparameters"}
    Xt, yt = toy(200, seed=4)
    pred = model.predict(Xt)
    rmse = float(((pred.mean - yt) ** 2).mean().sqrt())
    assert rmse < 0.5 * float(yt.std())
    assert (pred.var_y > pred.var_f).all()


def test_exact_gp_matches_dense_posterior():
    X, y = toy(50)
    model = ExactGP(2, training=Training(steps=0), noise=0.05, x_bounds=[[-2, -2], [2, 2]], y_stats=(0.0, 1.0))
    model.update(X, y)
    with torch.no_grad():
        Xs, Xt = X / 2, X[:7] / 2
        K = dense(model.kernel, Xs) + model.noise * torch.eye(50, dtype=D)
        Ks = dense(model.kernel, Xt, Xs)
        mean = Ks @ torch.linalg.solve(K, y)
        var = diagonal(model.kernel, Xt) - (Ks @ torch.linalg.solve(K, Ks.T)).diagonal()
    pred = model.predict(X[:7])
    assert torch.allclose(pred.mean, mean, rtol=1e-9, atol=1e-10)
    assert torch.allclose(pred.var_f, var, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", ["poam", "ssgp++", "wgpr"])
def test_lengthscale_map_and_inducing_inputs_in_user_units(name):
    X, y = toy(200, seed=9)
    opts = {"num_steps": 1, "num_inducing": 20} if name != "wgpr" else {}
    model = make_model(name, 2, x_bounds=[[-2, -2], [2, 2]], **opts)
    model.update(X, y)
    if name == "wgpr":  # an ensemble has no single kernel or inducing set
        assert model.inducing_inputs is None
        with pytest.raises(ValueError, match="no single kernel"):
            model.lengthscale_map(X[:5])
        return
    Z = model.inducing_inputs
    assert Z.shape == (20, 2) and (Z.abs() <= 2 + 1e-12).all()
    assert any(torch.equal(z, x) for z in Z[:3] for x in X)  # pivoted Cholesky picks data points
    ls = model.lengthscale_map(X[:7])
    assert ls.shape == (7,) and (ls > 0).all()
    if name == "poam":  # AK bounds (0.05, 0.5) in scaled units, times the half-range 2
        assert (ls >= 0.1 - 1e-12).all() and (ls <= 1.0 + 1e-12).all()
