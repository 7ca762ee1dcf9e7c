"""The BoTorch adapter: posterior blocks equal the model's own joint predictions, gradients reach X, qUCB runs,
conditioning equals an update without hyper-parameter steps, fantasies give batched models."""

import copy

import pytest
import torch

pytest.importorskip("botorch")
from botorch.acquisition import qUpperConfidenceBound  # noqa: E402
from botorch.optim import optimize_acqf  # noqa: E402
from botorch.sampling import SobolQMCNormalSampler  # noqa: E402

from onlinegp.botorch import OnlineGPModel  # noqa: E402
from onlinegp.models.exact import ExactGP  # noqa: E402
from onlinegp.models.wiski import WISKI  # noqa: E402
from onlinegp.training import Training  # noqa: E402

D = torch.float64
BOUNDS = torch.tensor([[0.0, 0.0], [2.0, 1.0]], dtype=D)


def objective(X):
    return -((X[..., 0] - 1.3) ** 2) - 2 * (X[..., 1] - 0.4) ** 2


def fitted(kind):
    g = torch.Generator().manual_seed(0)
    X = BOUNDS[0] + (BOUNDS[1] - BOUNDS[0]) * torch.rand(30, 2, dtype=D, generator=g)
    y = objective(X) + 0.01 * torch.randn(30, dtype=D, generator=g)
    gp = (
        WISKI(2, grid_size=12, training=Training(steps=3), x_bounds=BOUNDS)
        if kind == "wiski"
        else ExactGP(2, training=Training(steps=5), x_bounds=BOUNDS)
    )
    gp.update(X[:20], y[:20])
    for i in range(20, 30):
        gp.update(X[i : i + 1], y[i : i + 1])
    return gp


@pytest.mark.parametrize("kind", ["wiski", "exact"])
def test_posterior_blocks_match_joint_predictions_and_are_differentiable(kind):
    gp = fitted(kind)
    model = OnlineGPModel(gp, chunk_size=7)
    X = BOUNDS[0] + (BOUNDS[1] - BOUNDS[0]) * torch.rand(5, 3, 2, dtype=D)
    X.requires_grad_(True)
    grads = [None if p.grad is None else p.grad.clone() for p in gp.parameters()]
    post = model.posterior(X)
    assert post.mean.shape == (5, 3, 1) and post.mvn.covariance_matrix.shape == (5, 3, 3)
    for b in range(5):
        ref = gp.predict(X[b].detach(), full_cov=True)
        assert torch.allclose(post.mean[b, :, 0], ref.mean, atol=1e-8)
        assert torch.allclose(post.mvn.covariance_matrix[b], ref.cov_f, atol=1e-8)
    noisy = model.posterior(X.detach(), observation_noise=True)
    assert torch.allclose(
        noisy.variance[..., 0] - post.variance[..., 0].detach(),
        (gp.noise * gp.scaler.y_std**2).detach().expand(5, 3),
        atol=1e-8,
    )
    post.mean.sum().backward()
    assert X.grad is not None and bool(torch.isfinite(X.grad).all()) and float(X.grad.abs().sum()) > 0
    assert all((g is None and p.grad is None) or torch.equal(g, p.grad) for g, p in zip(grads, gp.parameters()))
    with pytest.raises(ValueError):
        model.posterior(torch.zeros(3, 5, dtype=D))
    # a q-set with a repeated point has a singular joint covariance: still a usable posterior
    Xdup = X.detach()[:2].clone()
    Xdup[:, 1] = Xdup[:, 0]
    samples = model.posterior(Xdup).rsample(torch.Size([4]))
    assert samples.shape == (4, 2, 3, 1) and bool(torch.isfinite(samples).all())


@pytest.mark.parametrize("kind", ["wiski", "exact"])
def test_qucb_optimisation_step(kind):
    gp = fitted(kind)
    model = OnlineGPModel(gp)
    acqf = qUpperConfidenceBound(model, beta=0.5, sampler=SobolQMCNormalSampler(torch.Size([64]), seed=0))
    cand, value = optimize_acqf(acqf, bounds=BOUNDS, q=3, num_restarts=2, raw_samples=16, options={"maxiter": 20})
    assert cand.shape == (3, 2) and bool(torch.isfinite(value))
    assert bool(((cand >= BOUNDS[0] - 1e-9) & (cand <= BOUNDS[1] + 1e-9)).all())
    # the model absorbs the batch and the loop goes on
    gp.update(cand, objective(cand))
    assert gp.num_data == 33


def test_condition_on_observations_and_fantasies():
    gp = fitted("wiski")
    model = OnlineGPModel(gp)
    Xn = torch.tensor([[0.5, 0.5], [1.5, 0.2]], dtype=D)
    Yn = objective(Xn).unsqueeze(-1)
    cond = model.condition_on_observations(Xn, Yn)
    ref = copy.deepcopy(gp)
    ref.num_steps = 0
    ref.update(Xn, Yn[:, 0])
    Xt = torch.rand(4, 2, dtype=D)
    assert torch.allclose(cond.posterior(Xt).mean[:, 0], ref.predict(Xt).mean, atol=1e-10)
    assert gp.num_data == 30  # the original is untouched
    fant = model.fantasize(Xn, SobolQMCNormalSampler(torch.Size([3]), seed=1))
    assert fant.batch_shape == torch.Size([3])
    assert fant.posterior(Xt.unsqueeze(0).expand(3, 4, 2)).mean.shape == (3, 4, 1)
    assert fant.posterior(Xt).mean.shape == (3, 4, 1)
    assert all(m.num_data == 32 for m in fant.models)
