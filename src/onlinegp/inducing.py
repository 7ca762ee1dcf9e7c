"""Choosing inducing inputs, as interchangeable strategies.

A selector is called as ``selector(kernel, Z_old, X_new, generator=..., model=...)`` and returns the new
inducing inputs (scaled units). Every online model (POAM, OVC, OSGPR, ...) accepts any selector, so adaptive
model size works for every method. ``model`` gives strategies that need it (VIPS's bounds) the current summary.
"""

from __future__ import annotations

from typing import Any, Protocol

import gpytorch
import torch
from torch import Tensor

from .kernels import dense, diagonal
from .linalg import pivoted_cholesky, pivoted_cholesky_dense

#: largest candidate set for which the dense LAPACK path forms the full kernel matrix
DENSE_LIMIT = 3000


class Selector(Protocol):
    def __call__(self, kernel: gpytorch.kernels.Kernel, Z: Tensor | None, X: Tensor, *,
                 generator: torch.Generator | None = None, model: Any = None) -> Tensor: ...


def candidates(Z: Tensor | None, X: Tensor) -> Tensor:
    return X if Z is None or Z.shape[0] == 0 else torch.cat([Z, X])


@torch.no_grad()
def greedy_variance(kernel: gpytorch.kernels.Kernel, C: Tensor, max_rank: int, tol: float = 0.0,
                    initial: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Indices of greedy-variance (pivoted-Cholesky) picks from ``C`` and the remaining conditional variances.

    Uses LAPACK ``dpstrf`` on the dense kernel matrix when ``C`` is small and nothing is forced; otherwise a
    row-by-row pivoted Cholesky that evaluates only the pivot rows (cost O(N·M²), independent of the history).
    """
    if initial is None and C.shape[0] <= DENSE_LIMIT and C.dtype == torch.float64:
        K = dense(kernel, C)
        idx = pivoted_cholesky_dense(K, max_rank, tol)
        return idx, torch.empty(0, dtype=C.dtype)
    return pivoted_cholesky(lambda i: dense(kernel, C[i], C), diagonal(kernel, C).detach().clone(), max_rank, tol,
                            initial)


class PivotedCholesky:
    """Fixed size M: the first M pivots of a pivoted Cholesky of k([Z; X], [Z; X]) (POAM §IV-A; Burt et al.).

    ``rel_tol`` stops early when the largest remaining variance falls below ``rel_tol · max k(x, x)`` (so
    duplicated inputs never become two inducing points).
    """

    def __init__(self, num_inducing: int = 500, rel_tol: float = 1e-8):
        if num_inducing < 1:
            raise ValueError(f"num_inducing must be positive, got {num_inducing}")
        self.num_inducing, self.rel_tol = int(num_inducing), rel_tol

    def __call__(self, kernel, Z, X, *, generator=None, model=None) -> Tensor:
        C = candidates(Z, X)
        scale = float(diagonal(kernel, C).max())
        idx, _ = greedy_variance(kernel, C, self.num_inducing, self.rel_tol * scale)
        return C[idx].clone()


class RandomSubset:
    """M points drawn uniformly from [Z; X] (POAM's Z-RAND ablation)."""

    def __init__(self, num_inducing: int = 500):
        self.num_inducing = int(num_inducing)

    def __call__(self, kernel, Z, X, *, generator=None, model=None) -> Tensor:
        C = candidates(Z, X)
        idx = torch.randperm(C.shape[0], generator=generator)[: self.num_inducing]
        return C[idx].clone()


class KMeans:
    """M k-means centroids of [Z; X] (Lloyd's algorithm, k-means++-free random start; POAM's k-means ablation)."""

    def __init__(self, num_inducing: int = 500, iters: int = 20):
        self.num_inducing, self.iters = int(num_inducing), iters

    def __call__(self, kernel, Z, X, *, generator=None, model=None) -> Tensor:
        C = candidates(Z, X)
        k = min(self.num_inducing, C.shape[0])
        centers = C[torch.randperm(C.shape[0], generator=generator)[:k]].clone()
        for _ in range(self.iters):
            assign = torch.cdist(C, centers).argmin(1)
            counts = torch.bincount(assign, minlength=k).to(C.dtype)
            sums = torch.zeros_like(centers).index_add_(0, assign, C)
            moved = counts > 0
            centers[moved] = sums[moved] / counts[moved, None]
        return centers


class Fixed:
    """Keep the given inducing inputs forever (for exactness tests and fixed-grid models)."""

    def __init__(self, Z: Tensor):
        self.Z = Z

    def __call__(self, kernel, Z, X, *, generator=None, model=None) -> Tensor:
        return self.Z.to(X).clone()


class Resample:
    """SSGP's inducing inputs (Bui et al. 2017, their code release): a random ``keep`` fraction of the old Z plus
    random new inputs, up to M in all (topped up from the old Z when the batch is small). SSGP then moves them
    by gradient on the online bound."""

    def __init__(self, num_inducing: int = 500, keep: float = 0.7):
        if num_inducing < 1 or not 0.0 <= keep <= 1.0:
            raise ValueError(f"need num_inducing >= 1 and 0 <= keep <= 1, got {num_inducing}, {keep}")
        self.num_inducing, self.keep = int(num_inducing), float(keep)

    def __call__(self, kernel, Z, X, *, generator=None, model=None) -> Tensor:
        M = self.num_inducing
        if Z is None or Z.shape[0] == 0:
            return X[torch.randperm(X.shape[0], generator=generator)[:M]].clone()
        n_new = min(X.shape[0], M - min(Z.shape[0], int(self.keep * M)))
        n_old = min(Z.shape[0], M - n_new)
        old = Z[torch.randperm(Z.shape[0], generator=generator)[:n_old]]
        new = X[torch.randperm(X.shape[0], generator=generator)[:n_new]]
        return torch.cat([old, new]).clone()


SELECTORS = {"pivoted": PivotedCholesky, "random": RandomSubset, "kmeans": KMeans, "resample": Resample}


def make_selector(spec: str | Selector, num_inducing: int = 500) -> Selector:
    """A selector from its name ('pivoted', 'random', 'kmeans', ...) or an instance passed through."""
    if callable(spec) and not isinstance(spec, str):
        return spec
    try:
        return SELECTORS[spec](num_inducing)
    except KeyError:
        raise ValueError(f"unknown inducing selector {spec!r}: choose one of {sorted(SELECTORS)}") from None
