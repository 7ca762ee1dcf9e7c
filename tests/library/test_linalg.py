import numpy as np
import pytest
import torch

from onlinegp.inducing import greedy_variance
from onlinegp.kernels import dense, make_kernel
from onlinegp.linalg import (
    CholeskyError,
    JitterLog,
    cholesky,
    pivoted_cholesky,
    pivoted_cholesky_dense,
    trisolve,
)
from tests.reference import cho_solve


def naive_greedy(K, rank):
    """Reference: repeatedly pick the largest conditional variance diag(K - K_.S K_SS^-1 K_S.)."""
    chosen = []
    for _ in range(rank):
        if chosen:
            S = torch.tensor(chosen)
            Q = K[:, S] @ torch.linalg.solve(K[S][:, S], K[S, :])
            d = (K - Q).diagonal().clone()
        else:
            d = K.diagonal().clone()
        d[chosen] = -1
        chosen.append(int(torch.argmax(d)))
    return chosen


def test_cholesky_no_jitter_when_pd():
    A = torch.randn(6, 6, dtype=torch.float64)
    A = A @ A.T + 6 * torch.eye(6, dtype=torch.float64)
    log = JitterLog()
    L = cholesky(A, log)
    assert torch.allclose(L @ L.T, A)
    assert log.max_jitter == 0.0


def test_cholesky_escalates_and_reports_jitter():
    v = torch.randn(5, 1, dtype=torch.float64)
    A = v @ v.T  # rank one: needs jitter
    log = JitterLog()
    L = cholesky(A, log)
    assert log.max_jitter > 0 and log.count == 1
    assert torch.allclose(L @ L.T, A + log.max_jitter * torch.eye(5, dtype=torch.float64), atol=1e-12)


def test_cholesky_bounded():
    A = -torch.eye(3, dtype=torch.float64)
    with pytest.raises(CholeskyError, match="not positive definite"):
        cholesky(A)


def test_trisolve_and_cho_solve():
    A = torch.randn(5, 5, dtype=torch.float64)
    A = A @ A.T + 5 * torch.eye(5, dtype=torch.float64)
    L = torch.linalg.cholesky(A)
    b = torch.randn(5, 3, dtype=torch.float64)
    assert torch.allclose(L @ trisolve(L, b), b)
    assert torch.allclose(L.T @ trisolve(L, b, transpose=True), b)
    assert torch.allclose(A @ cho_solve(L, b), b)
    assert torch.allclose(L @ trisolve(L, b[:, 0]), b[:, 0])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pivoted_cholesky_equals_greedy_variance(seed):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(60, 2, dtype=torch.float64, generator=g) * 2 - 1
    k = make_kernel("rbf", 2, lengthscale=0.4)
    with torch.no_grad():
        K = dense(k, X)
    ref = naive_greedy(K, 12)
    lapack = pivoted_cholesky_dense(K, 12).tolist()
    rows, remaining = pivoted_cholesky(lambda i: K[i], K.diagonal().clone(), 12)
    assert lapack == ref
    assert rows.tolist() == ref
    # remaining variance is tr(K - Q) of the chosen set
    S = torch.tensor(ref)
    Q = K[:, S] @ torch.linalg.solve(K[S][:, S], K[S, :])
    assert np.isclose(float(remaining.sum()), float((K - Q).diagonal().sum()), rtol=1e-6, atol=1e-9)


def test_greedy_variance_paths_agree_and_respect_tolerance():
    g = torch.Generator().manual_seed(3)
    X = torch.rand(40, 2, dtype=torch.float64, generator=g)
    X = torch.cat([X, X[:5]])  # duplicates must never be picked twice
    k = make_kernel("rbf", 2, lengthscale=0.3)
    idx, _ = greedy_variance(k, X, 45, tol=1e-8)
    assert len({tuple(r) for r in X[idx].tolist()}) == len(idx)
    idx_rows, _ = greedy_variance(k, X, 45, tol=1e-8, initial=torch.tensor([], dtype=torch.long))
    assert torch.equal(X[idx], X[idx_rows])  # same points in the same order (ties between duplicates aside)
    small, _ = greedy_variance(k, X, 10)
    assert torch.equal(X[small], X[idx[:10]])
