"""Small dense linear algebra shared by every method.

* :func:`cholesky` -- Cholesky with bounded, reported jitter escalation.
* :func:`trisolve` -- triangular solves (never an explicit inverse).
* :func:`pivoted_cholesky` -- greedy pivoted Cholesky (LAPACK ``?pstrf`` for dense matrices, or a vectorised
  row-by-row routine that only ever touches ``rank`` kernel rows).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from scipy.linalg import lapack
from torch import Tensor

from . import settings

log = logging.getLogger(__name__)

#: relative jitter tried first (times the mean diagonal), then multiplied by 10 up to ``MAX_JITTER`` (default of
#: settings.max_jitter)
BASE_JITTER = {torch.float64: 1e-10, torch.float32: 1e-6}
MAX_JITTER = 1e-2
JITTER_GROWTH = 10.0
#: relative jitter above which a Cholesky is logged at WARNING level and an update reports its matrices as
#: ill-conditioned (:func:`onlinegp.health.conditioning`)
WARN_JITTER = 1e-6


class CholeskyError(RuntimeError):
    """Raised when a matrix stays non-positive-definite even with the largest permitted jitter."""


@dataclass
class JitterLog:
    """Largest jitter any Cholesky of one model call needed: absolute (added to the diagonal) and relative (to the
    matrix's mean diagonal), and how many Choleskies needed any."""

    max_jitter: float = 0.0
    max_relative: float = 0.0
    count: int = 0

    def record(self, jitter: float, relative: float) -> None:
        if jitter > 0:
            self.count += 1
            self.max_jitter = max(self.max_jitter, jitter)
            self.max_relative = max(self.max_relative, relative)

    def merge(self, other: JitterLog) -> None:
        """Add another log's record (an ensemble's member's)."""
        self.count += other.count
        self.max_jitter = max(self.max_jitter, other.max_jitter)
        self.max_relative = max(self.max_relative, other.max_relative)


def cholesky(A: Tensor, jitter_log: JitterLog | None = None, max_jitter: float | None = None) -> Tensor:
    """Lower Cholesky root of a symmetric PSD matrix (or batch).

    Tries without jitter first; on failure adds ``j * mean(diag)`` with ``j`` growing tenfold from
    ``BASE_JITTER[dtype]`` up to ``max_jitter`` (default: ``settings.max_jitter``). The jitter used is recorded in
    ``jitter_log`` and logged at WARNING level when above ``WARN_JITTER`` relative, so it is never silent. Raises
    :class:`CholeskyError` past the bound.
    """
    L, info = torch.linalg.cholesky_ex(A)
    if not bool((info != 0).any()):
        return L
    scale = A.diagonal(dim1=-2, dim2=-1).mean(-1, keepdim=True).abs().clamp_min(1e-30)
    eye = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device)
    rel = BASE_JITTER.get(A.dtype, 1e-6)
    max_jitter = settings.max_jitter.value() if max_jitter is None else max_jitter
    while rel <= max_jitter * (1 + 1e-9):
        jitter = rel * scale
        L, info = torch.linalg.cholesky_ex(A + jitter.unsqueeze(-1) * eye)
        if not bool((info != 0).any()):
            added = float(jitter.detach().max())
            if jitter_log is not None:
                jitter_log.record(added, rel)
            lvl = logging.WARNING if rel > WARN_JITTER else logging.DEBUG
            log.log(lvl, "cholesky: added jitter %.3g (relative %.1e) to a %d x %d matrix", added, rel, *A.shape[-2:])
            return L
        rel *= JITTER_GROWTH
    raise CholeskyError(
        f"matrix of size {tuple(A.shape)} is not positive definite even with relative jitter {max_jitter:g}; "
        "check the kernel hyper-parameters (a length-scale or noise collapsing to zero) or remove duplicate inputs"
    )


def trisolve(L: Tensor, B: Tensor, upper: bool = False, transpose: bool = False) -> Tensor:
    """Solve ``L X = B`` (or ``L^T X = B`` with ``transpose=True``) for a lower-triangular ``L``.

    ``B`` may be a vector. ``upper=True`` treats ``L`` as upper triangular.
    """
    vec = B.dim() == L.dim() - 1
    rhs = B.unsqueeze(-1) if vec else B
    A = L.mT if transpose else L
    X = torch.linalg.solve_triangular(A, rhs, upper=(upper != transpose))
    return X.squeeze(-1) if vec else X


def condition_estimate(L: Tensor) -> float:
    """LAPACK's 1-norm estimate of cond(A) = cond(L)² from the lower Cholesky factor L of A, in O(n²)."""
    Ln = L.detach().cpu().double().numpy()
    rcond, info = lapack.dtrcon(Ln, norm="1", uplo="L", diag="N")
    return float("inf") if info != 0 or rcond == 0 else float(rcond) ** -2


def pivoted_cholesky_dense(K: Tensor | np.ndarray, max_rank: int | None = None, tol: float = 0.0) -> Tensor:
    """Greedy pivots of a dense PSD matrix via LAPACK ``dpstrf`` (float64).

    Returns the indices of the first ``min(rank, max_rank)`` pivots in the order chosen: each is the point of
    largest remaining conditional variance. ``tol`` is the absolute stopping threshold on that variance.
    """
    A = np.array(K.detach().cpu().numpy() if isinstance(K, Tensor) else K, dtype=np.float64, order="F")
    n = A.shape[0]
    if n == 0:
        return torch.zeros(0, dtype=torch.long)
    _, piv, rank, info = lapack.dpstrf(A, tol=tol if tol > 0 else -1.0, lower=1, overwrite_a=1)
    if info < 0:
        raise ValueError(f"dpstrf: illegal argument {-info}")
    rank = int(rank) if info == 1 else n
    k = rank if max_rank is None else min(rank, int(max_rank))
    return torch.as_tensor(piv[:k] - 1, dtype=torch.long)


def pivoted_cholesky(
    rows: Callable[[Tensor], Tensor],
    diag: Tensor,
    max_rank: int,
    tol: float = 0.0,
    initial: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Greedy pivoted Cholesky that evaluates only the kernel rows it pivots on.

    ``rows(idx)`` returns ``K[idx, :]`` (len(idx) x N); ``diag`` is ``K``'s diagonal. Pivots listed in ``initial``
    are taken first, in order (VIPS keeps old inducing inputs this way). Stops at ``max_rank`` pivots or when the
    largest remaining variance falls to ``tol``. Returns ``(indices, remaining_variance)``; the sum of the latter
    is ``tr(K - Q)`` for the chosen set (Burt et al.'s conditional-variance criterion).
    """
    n = diag.shape[0]
    max_rank = min(int(max_rank), n)
    d = diag.clone()
    F = torch.zeros(max_rank, n, dtype=diag.dtype, device=diag.device)
    chosen: list[int] = []
    forced = [] if initial is None else [int(i) for i in initial]
    for m in range(max_rank):
        if m < len(forced):
            i = forced[m]
        else:
            i = int(torch.argmax(d))
            if float(d[i]) <= tol:
                break
        piv = float(d[i])
        if piv <= 0:
            if m < len(forced):  # a forced pivot already explained; keep it but it adds no new direction
                chosen.append(i)
                continue
            break
        row = rows(torch.tensor([i], device=diag.device)).reshape(-1)
        f = (row - F[:m, i] @ F[:m]) / piv**0.5
        F[m] = f
        d = (d - f * f).clamp_min(0.0)
        d[i] = 0.0
        chosen.append(i)
    return torch.tensor(chosen, dtype=torch.long, device=diag.device), d


def lanczos_basis(
    matmul: Callable[[Tensor], Tensor],
    dim: int,
    rank: int,
    dtype: torch.dtype = torch.float64,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Orthonormal Lanczos (Krylov) basis Q (dim × rank) of a symmetric PSD operator given by ``matmul``.

    Full re-orthogonalisation (twice, "twice is enough"); on breakdown (an invariant subspace found before
    ``rank`` vectors) it continues from a fresh random vector orthogonal to the basis, so ``rank = dim`` always
    returns a complete orthonormal basis. Then Q (QᵀAQ) Qᵀ is the rank-``rank`` Lanczos approximation of A
    (Golub & Van Loan §10.1; Stanton et al. 2021, appendix A.1). No gradients flow through the basis.
    """
    rank = min(int(rank), int(dim))
    Q = torch.zeros(dim, rank, dtype=dtype)
    with torch.no_grad():
        v = torch.randn(dim, dtype=dtype, generator=generator, device="cpu").to(Q.device)
        for j in range(rank):
            scale = v.norm()
            for _ in range(2):
                v = v - Q[:, :j] @ (Q[:, :j].mT @ v)
            norm = v.norm()
            if not bool(norm > 1e-12 * scale):  # breakdown: restart orthogonally to the basis so far
                v = torch.randn(dim, dtype=dtype, generator=generator, device="cpu").to(Q.device)
                for _ in range(2):
                    v = v - Q[:, :j] @ (Q[:, :j].mT @ v)
                norm = v.norm()
            Q[:, j] = v / norm
            v = matmul(Q[:, j])
    return Q
