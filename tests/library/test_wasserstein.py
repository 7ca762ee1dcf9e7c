"""The closed-form 2-Wasserstein distance against a dense scipy.linalg.sqrtm computation."""

import numpy as np
import pytest
import scipy.linalg
import torch

from onlinegp.wasserstein import bures_trace, psd_sqrt, w2_squared

D = torch.float64


def random_gaussian(n, rank=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(n, rank or n, dtype=D, generator=g)
    return torch.randn(n, dtype=D, generator=g), A @ A.T / n + (0 if rank else 1e-3) * torch.eye(n, dtype=D)


def scipy_w2(m1, S1, m2, S2):
    S1, S2 = S1.numpy(), S2.numpy()
    R = scipy.linalg.sqrtm(S2)
    cross = scipy.linalg.sqrtm(R @ S1 @ R)
    return float(np.sum((m1 - m2).numpy() ** 2) + np.trace(S1 + S2 - 2 * np.real(cross)))


@pytest.mark.parametrize("n", [1, 3, 20, 60])
def test_equals_scipy_sqrtm(n):
    for seed in range(3):
        m1, S1 = random_gaussian(n, seed=seed)
        m2, S2 = random_gaussian(n, seed=seed + 100)
        ref = scipy_w2(m1, S1, m2, S2)
        assert float(w2_squared(m1, S1, m2, S2)) == pytest.approx(ref, rel=1e-8, abs=1e-10)


def test_rank_deficient_covariances_match_scipy():
    m1, S1 = random_gaussian(30, rank=5, seed=1)
    m2, S2 = random_gaussian(30, rank=30, seed=2)
    ref = scipy_w2(m1, S1, m2, S2)
    assert float(w2_squared(m1, S1, m2, S2)) == pytest.approx(ref, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("rank,rel", [(None, 1e-10), (4, 1e-7)])
def test_zero_for_identical_and_symmetric(rank, rel):
    # a rank-deficient covariance limits the accuracy to about n·sqrt(eps·‖Σ‖) (the square root at 0)
    m1, S1 = random_gaussian(25, rank=rank, seed=3)
    m2, S2 = random_gaussian(25, seed=4)
    assert float(w2_squared(m1, S1, m1.clone(), S1.clone())) == pytest.approx(0.0, abs=1e-10)
    assert float(w2_squared(m1, S1, m2, S2)) == pytest.approx(float(w2_squared(m2, S2, m1, S1)), rel=rel)
    assert float(bures_trace(S1, S2)) == pytest.approx(float(bures_trace(S2, S1)), rel=rel)


def test_known_closed_forms():
    # commuting (diagonal) covariances: W₂² = ‖Δμ‖² + Σ (√a − √b)²
    a, b = torch.tensor([1.0, 4.0, 0.25], dtype=D), torch.tensor([9.0, 1.0, 0.25], dtype=D)
    m1, m2 = torch.tensor([0.0, 1.0, 2.0], dtype=D), torch.tensor([1.0, 1.0, 0.0], dtype=D)
    expected = 1 + 4 + ((a.sqrt() - b.sqrt()) ** 2).sum()
    assert float(w2_squared(m1, torch.diag(a), m2, torch.diag(b))) == pytest.approx(float(expected), rel=1e-12)
    # a point mass against N(0, Σ): ‖μ‖² + tr Σ
    _, S = random_gaussian(10, seed=5)
    z = torch.zeros(10, dtype=D)
    assert float(w2_squared(z, torch.zeros(10, 10, dtype=D), z, S)) == pytest.approx(float(S.trace()), rel=1e-10)


def test_batched_equals_loop_and_sqrt_squares_back():
    pairs = [(random_gaussian(12, seed=s), random_gaussian(12, seed=50 + s)) for s in range(4)]
    m1, S1 = (torch.stack([p[0][i] for p in pairs]) for i in (0, 1))
    m2, S2 = (torch.stack([p[1][i] for p in pairs]) for i in (0, 1))
    batched = w2_squared(m1, S1, m2, S2)
    assert batched.shape == (4,)
    loop = torch.stack([w2_squared(m1[i], S1[i], m2[i], S2[i]) for i in range(4)])
    assert torch.allclose(batched, loop, rtol=1e-12, atol=1e-12)
    R = psd_sqrt(S1)
    assert torch.allclose(R @ R, S1, atol=1e-12)


def test_shape_mismatch_rejected():
    m, S = random_gaussian(4)
    with pytest.raises(ValueError, match="equal shapes"):
        w2_squared(m, S, m[:3], S[:3, :3])
