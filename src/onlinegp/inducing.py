"""Choosing inducing inputs, as interchangeable strategies.

A selector is called as ``selector(kernel, Z_old, X_new, generator=..., context=...)`` and returns the new
inducing inputs (scaled units). Every online model (POAM, OVC, OSGPR, ...) accepts any selector, so adaptive
model size works for every method. ``context`` (:class:`SelectionContext`) is what the model tells its selector
about the batch it absorbs: the batch targets, σ², the summary of the past and the targets' moments for VIPS's
bounds (Pescador-Barrios et al. 2024), and the model's counts for :class:`KeepAfterFirst`. Selectors that need none
of it ignore it; none calls the model back.
"""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from gpytorch.kernels import Kernel
from torch import Generator, Tensor

from .kernels import dense, diagonal
from .linalg import CholeskyError, cholesky, pivoted_cholesky, pivoted_cholesky_dense, trisolve
from .objectives import noise_log_lik, online_bound, online_bounds
from .posterior import InducingPosterior, kuu

#: largest candidate set for which the dense LAPACK path forms the full kernel matrix
DENSE_LIMIT = 3000
#: fewest inducing inputs :class:`KeepAfterFirst` keeps from a first batch without topping them up from later ones
MIN_FIRST_BATCH = 20


def _no_summary() -> InducingPosterior | None:
    return None


def _no_moments() -> tuple[float, float] | None:
    return None


@dataclass(frozen=True)
class SelectionContext:
    """What a model tells its selector about the batch it absorbs, in scaled units (the selector never reaches back
    into the model).

    Attributes:
        targets: the targets of the rows of ``X`` the selector is given (None where the model passes none, e.g. when
            merging another robot's inducing inputs).
        noise: σ², the model's noise variance (detached).
        past: the summary q(u) of the data before the batch, formed on demand (POAM's costs O(M³) from its
            projected terms, so only a selector that needs it pays); None on the first batch and where the model
            keeps no such summary (OSVGP's is its q(u), not a bound's).
        target_moments: the mean and variance of all targets so far (this batch's included), formed on demand;
            None where the model does not keep them.
        num_data: points the model had absorbed before this batch (``model.num_data``).
        num_updates: updates the model had completed before this one (``model.num_updates``).

    ``past`` and ``target_moments`` are functions of the model as it is while it selects: call them inside the
    selector's call, not after the update has moved on. The VIPS rule (Pescador-Barrios et al. 2024, §4) needs
    ``targets``, ``noise``, ``past`` and ``target_moments``; :class:`KeepAfterFirst` the two counts; the other
    selectors nothing.
    """

    targets: Tensor | None = None
    noise: Tensor | None = None
    past: Callable[[], InducingPosterior | None] = _no_summary
    target_moments: Callable[[], tuple[float, float] | None] = _no_moments
    num_data: int = 0
    num_updates: int = 0


class Selector(Protocol):
    def __call__(
        self,
        kernel: Kernel,
        Z: Tensor | None,
        X: Tensor,
        *,
        generator: Generator | None = None,
        context: SelectionContext | None = None,
    ) -> Tensor: ...


def candidates(Z: Tensor | None, X: Tensor) -> Tensor:
    return X if Z is None or Z.shape[0] == 0 else torch.cat([Z, X])


def unique_rows(C: Tensor) -> Tensor:
    """The distinct rows of ``C`` in the order they first occur (``C`` itself when none repeats): two equal
    inducing inputs make K_zz singular."""
    _, inverse = torch.unique(C, dim=0, return_inverse=True)
    if int(inverse.max()) + 1 == C.shape[0]:
        return C
    rows = torch.arange(C.shape[0], device=C.device)
    first = torch.full((C.shape[0],), C.shape[0], device=C.device).scatter_reduce(0, inverse, rows, "amin")
    return C[first[first < C.shape[0]].sort().values]


@torch.no_grad()
def greedy_variance(
    kernel: Kernel, C: Tensor, max_rank: int, tol: float = 0.0, initial: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Indices of greedy-variance (pivoted-Cholesky) picks from ``C`` and the remaining conditional variances.

    Uses LAPACK ``dpstrf`` on the dense kernel matrix when ``C`` is small and nothing is forced; otherwise a
    row-by-row pivoted Cholesky that evaluates only the pivot rows (cost O(N·M²), independent of the history).
    """
    if initial is None and C.shape[0] <= DENSE_LIMIT and C.dtype in (torch.float32, torch.float64):
        K = dense(kernel, C)
        idx = pivoted_cholesky_dense(K, max_rank, tol)
        return idx, torch.empty(0, dtype=C.dtype)
    return pivoted_cholesky(
        lambda i: dense(kernel, C[i], C), diagonal(kernel, C).detach().clone(), max_rank, tol, initial
    )


class PoolSelector(ABC):
    """A selector that picks the new inducing inputs from the pool C = [Z; X] (:func:`candidates`): subclasses define
    ``pick(kernel, C, generator)``; ``context`` is not used."""

    def __call__(
        self,
        kernel: Kernel,
        Z: Tensor | None,
        X: Tensor,
        *,
        generator: Generator | None = None,
        context: SelectionContext | None = None,
    ) -> Tensor:
        return self.pick(kernel, candidates(Z, X), generator)

    @abstractmethod
    def pick(self, kernel: Kernel, C: Tensor, generator: Generator | None) -> Tensor:
        """The new inducing inputs, chosen from the pool ``C``."""


class PivotedCholesky(PoolSelector):
    """Fixed size M: the first M pivots of a pivoted Cholesky of k([Z; X], [Z; X]) (POAM §IV-A; Burt et al.).

    ``rel_tol`` stops early when the largest remaining variance falls below ``rel_tol · max k(x, x)`` (so
    duplicated inputs never become two inducing points).
    """

    def __init__(self, num_inducing: int = 500, rel_tol: float = 1e-8):
        if not isinstance(num_inducing, numbers.Integral) or num_inducing < 1:
            raise ValueError(f"num_inducing must be a positive integer, got {num_inducing!r}")
        self.num_inducing, self.rel_tol = int(num_inducing), rel_tol

    def pick(self, kernel: Kernel, C: Tensor, generator: Generator | None) -> Tensor:
        scale = float(diagonal(kernel, C).max())
        idx, _ = greedy_variance(kernel, C, self.num_inducing, self.rel_tol * scale)
        return C[idx].clone()


class RandomSubset(PoolSelector):
    """M distinct points drawn uniformly from the distinct rows of [Z; X] (POAM's Z-RAND ablation)."""

    def __init__(self, num_inducing: int = 500):
        self.num_inducing = int(num_inducing)

    def pick(self, kernel: Kernel, C: Tensor, generator: Generator | None) -> Tensor:
        U = unique_rows(C)
        idx = torch.randperm(U.shape[0], generator=generator, device="cpu")[: self.num_inducing]
        return U[idx].clone()


class KMeans(PoolSelector):
    """M k-means centroids of [Z; X] (Lloyd's algorithm, k-means++-free random start; POAM's k-means ablation).

    The start is M distinct rows of the pool (all of them when it has fewer), and centroids that end up coincident
    are kept once, so duplicated inputs never give two equal inducing inputs."""

    def __init__(self, num_inducing: int = 500, iters: int = 20):
        self.num_inducing, self.iters = int(num_inducing), iters

    def pick(self, kernel: Kernel, C: Tensor, generator: Generator | None) -> Tensor:
        U = unique_rows(C)
        k = min(self.num_inducing, U.shape[0])
        centers = U[torch.randperm(U.shape[0], generator=generator, device="cpu")[:k]].clone()
        for _ in range(self.iters):
            assign = torch.cdist(C, centers).argmin(1)
            counts = torch.bincount(assign, minlength=k).to(C.dtype)
            sums = torch.zeros_like(centers).index_add_(0, assign, C)
            moved = counts > 0
            centers[moved] = sums[moved] / counts[moved, None]
        return unique_rows(centers)


class Fixed:
    """Keep the given inducing inputs forever (for exactness tests and fixed-grid models)."""

    def __init__(self, Z: Tensor):
        self.Z = Z

    @property
    def num_inducing(self) -> int:
        """M, the size of the kept set: a fixed size, which the size check (:func:`onlinegp.health.size`) reads."""
        return int(self.Z.shape[0])

    def __call__(
        self,
        kernel: Kernel,
        Z: Tensor | None,
        X: Tensor,
        *,
        generator: Generator | None = None,
        context: SelectionContext | None = None,
    ) -> Tensor:
        return self.Z.to(X).clone()


class Resample:
    """SSGP's inducing inputs (Bui et al. 2017, their code release): a random ``keep`` fraction of the old Z plus
    random new inputs, up to M in all (topped up from the old Z when the batch is small). SSGP then moves them
    by gradient on the online bound."""

    def __init__(self, num_inducing: int = 500, keep: float = 0.7):
        if not isinstance(num_inducing, numbers.Integral) or num_inducing < 1 or not 0.0 <= keep <= 1.0:
            raise ValueError(f"need an integer num_inducing >= 1 and 0 <= keep <= 1, got {num_inducing!r}, {keep!r}")
        self.num_inducing, self.keep = int(num_inducing), float(keep)

    def __call__(
        self,
        kernel: Kernel,
        Z: Tensor | None,
        X: Tensor,
        *,
        generator: Generator | None = None,
        context: SelectionContext | None = None,
    ) -> Tensor:
        M = self.num_inducing
        if Z is None or Z.shape[0] == 0:
            return X[torch.randperm(X.shape[0], generator=generator, device="cpu")[:M]].clone()
        n_new = min(X.shape[0], M - min(Z.shape[0], int(self.keep * M)))
        n_old = min(Z.shape[0], M - n_new)
        old = Z[torch.randperm(Z.shape[0], generator=generator, device="cpu")[:n_old]]
        new = X[torch.randperm(X.shape[0], generator=generator, device="cpu")[:n_new]]
        return torch.cat([old, new]).clone()


@torch.no_grad()
def residual_traces(kernel: Kernel, C: Tensor, idx: Tensor, rows: Tensor | None = None) -> Tensor:
    """tr(K − Q) over the rows ``rows`` of C (default: all) for every prefix of the inducing set C[idx].

    Element m−1 uses the first m pivots; one Cholesky of K at the pivots serves every prefix.
    """
    target = C if rows is None else C[rows]
    if idx.numel() == 0:
        return diagonal(kernel, target).sum().reshape(1)
    L = cholesky(kuu(kernel, C[idx]))
    F = trisolve(L, dense(kernel, C[idx], target))
    return diagonal(kernel, target).sum() - F.pow(2).sum(1).cumsum(0)


class ConditionalVariance(PoolSelector):
    """Greedy variance from the pool [Z; X] until tr(K − Q) ≤ η over the pool (Burt et al. 2020;
    Pescador-Barrios et al. 2024, app. E).

    The pivots come from a pivoted Cholesky run to a largest remaining variance of η / |pool| (so the trace rule
    is met on the way); the set is then cut at the first prefix whose residual trace is at most η.
    ``max_inducing`` optionally caps M.
    """

    def __init__(self, eta: float = 0.1, max_inducing: int | None = None):
        if eta <= 0:
            raise ValueError(f"eta must be positive, got {eta}")
        self.eta, self.max_inducing = float(eta), max_inducing

    def pick(self, kernel: Kernel, C: Tensor, generator: Generator | None) -> Tensor:
        cap = C.shape[0] if self.max_inducing is None else min(int(self.max_inducing), C.shape[0])
        idx, _ = greedy_variance(kernel, C, cap, self.eta / C.shape[0])
        traces = residual_traces(kernel, C, idx)
        below = (traces <= self.eta).nonzero()
        m = int(below[0]) + 1 if below.numel() else idx.numel()
        return C[idx[: max(m, 1)]].clone()


class OIPS:
    """Online Inducing Points Selection (Galy-Fajou & Opper 2021; Pescador-Barrios et al. 2024, app. E): keep Z and add
    each new input, in stream order, whose largest kernel correlation k(x, z) / √(k(x, x) k(z, z)) with the inducing set
    so far is below ρ (default 0.8; for a stationary kernel of unit variance this is max_z k(x, z) < ρ)."""

    def __init__(self, rho: float = 0.8, max_inducing: int | None = None):
        if not 0.0 < rho < 1.0:
            raise ValueError(f"rho must be in (0, 1), got {rho}")
        self.rho, self.max_inducing = float(rho), max_inducing

    @torch.no_grad()
    def __call__(
        self,
        kernel: Kernel,
        Z: Tensor | None,
        X: Tensor,
        *,
        generator: Generator | None = None,
        context: SelectionContext | None = None,
    ) -> Tensor:
        dx = diagonal(kernel, X).clamp_min(1e-300).sqrt()
        corr_new = (dense(kernel, X) / dx[:, None] / dx[None, :]).cpu().numpy()
        if Z is None or Z.shape[0] == 0:
            old = np.full(X.shape[0], -np.inf)
        else:
            dz = diagonal(kernel, Z).clamp_min(1e-300).sqrt()
            old = (dense(kernel, X, Z) / dx[:, None] / dz[None, :]).max(1).values.cpu().numpy()
        budget = np.inf if self.max_inducing is None else self.max_inducing - (0 if Z is None else Z.shape[0])
        added: list[int] = []
        for i in range(X.shape[0]):
            if len(added) >= budget:
                break
            if old[i] < self.rho and (not added or corr_new[i, added].max() < self.rho):
                added.append(i)
        new = X[torch.as_tensor(added, dtype=torch.long)]
        return new.clone() if Z is None or Z.shape[0] == 0 else torch.cat([Z, new]).clone()


@dataclass
class VIPSStep:
    """What one VIPS selection saw: sizes, Û(M), the reference the gap is measured from (L* or Û(M)), L̂(M_b),
    L_noise, the tolerance α and the gap at the stop."""

    num_old: int
    num_added: int
    bound_size: int
    upper: float
    reference: float
    lower: float
    noise_log_lik: float
    alpha: float
    lower_path: Tensor

    @property
    def gap(self) -> float:
        return self.reference - self.lower


def _vips_inputs(
    context: SelectionContext | None, X: Tensor
) -> tuple[Tensor, InducingPosterior | None, Tensor, tuple[float, float]]:
    """(batch targets, summary q(u) of the past, σ², mean and variance of all targets so far) from the model's
    ``context``, in scaled units; ValueError when it lacks any of them."""
    targets = None if context is None else context.targets
    moments = None if context is None or targets is None else context.target_moments()
    if targets is None or context.noise is None or moments is None:
        raise ValueError(
            "the VIPS selector needs a SelectionContext with the batch targets, σ², the summary of the past and "
            "the targets' moments: use it inside a model that passes them (VIPS, or a POAM-family model: "
            "make_model('vips') or make_model('poam', inducing='vips')), or pass selector(kernel, Z, X, context=...)"
        )
    if targets.shape[0] != X.shape[0]:
        raise ValueError(f"the context holds {targets.shape[0]} targets for {X.shape[0]} inputs; they must match")
    return targets, context.past(), context.noise, moments


class VIPSSelector:
    """Vegas Inducing Point Selection (Pescador-Barrios et al. 2024, §4; Algorithm 1 in appendix C).

    Keep the old inducing inputs; order the new inputs by greedy variance given them; add them one at a time
    until R − L̂(M_b) ≤ δ |R − L_noise| (eqs. 20–21), R the best reachable bound. The greedy set holds the old
    inputs plus up to ``max_new`` picks (Pescador-Barrios et al. cap M at 5000), stopping early once every
    candidate's conditional variance is below ``rel_tol`` of the prior's. When it stops early or holds every candidate,
    it spans all N_n + M_a inputs to that tolerance and R = L* = L̂(N_n + M_a) (§4.1, the text's choice for batches
    that fit), taken as L̂ over the greedy set; Û over that set is not used there, as its t·I also lands on the old
    summary's pseudo-targets, whose precision grows as the posterior sharpens, so it can exceed L* by more than α
    (13.1 nats against α = 11.5 on elevators' 12th batch, where measuring from Û takes all 505 candidates:
    benchmarks/studies/results/study_vips_upper_gap.md). Only a greedy set cut at ``max_new`` takes R = Û(M) (eq. 17).
    L_noise = Σ log N(y_n; ȳ, s²) with ȳ, s² over all targets so far. One evaluation of
    :func:`~onlinegp.objectives.online_bounds` gives L̂ for every prefix, so the stopping point is exact.

    The model supplies the batch targets, σ², the summary of the past and the targets' moments in its
    :class:`SelectionContext`: VIPS passes its q(u); POAM's projected terms (a, B) are turned into the q(u) they
    define, so POAM and OVC accept this selector too. ``last`` holds the :class:`VIPSStep` of the latest call.
    """

    def __init__(self, delta: float = 0.05, max_new: int = 2000, rel_tol: float = 1e-8):
        if delta <= 0:
            raise ValueError(f"delta must be positive, got {delta}")
        if max_new < 1:
            raise ValueError(f"max_new must be positive, got {max_new}")
        self.delta, self.max_new, self.rel_tol = float(delta), int(max_new), rel_tol
        self.last: VIPSStep | None = None

    @torch.no_grad()
    def __call__(
        self,
        kernel: Kernel,
        Z: Tensor | None,
        X: Tensor,
        *,
        generator: Generator | None = None,
        context: SelectionContext | None = None,
    ) -> Tensor:
        y, old, noise, (mean, var) = _vips_inputs(context, X)
        Ma = 0 if Z is None else Z.shape[0]
        C = candidates(Z, X)
        scale = float(diagonal(kernel, C).max())
        size = min(C.shape[0], Ma + self.max_new)
        idx, _ = greedy_variance(kernel, C, size, self.rel_tol * scale, initial=torch.arange(Ma) if Ma else None)
        Zb = C[idx]
        bounds = online_bounds(kernel, noise, Zb, X, y, old if Ma else None)
        l_noise = float(noise_log_lik(y, mean, var))
        upper = float(bounds.upper)
        spans_all = Zb.shape[0] < Ma + self.max_new or Zb.shape[0] == C.shape[0]
        reference = float(bounds.lower[-1]) if spans_all else upper
        alpha = self.delta * abs(reference - l_noise)
        first = max(Ma, 1)
        ok = ((reference - bounds.lower[first - 1 :]) <= alpha).nonzero()
        m = first + int(ok[0]) if ok.numel() else Zb.shape[0]
        self.last = VIPSStep(
            num_old=Ma,
            num_added=m - Ma,
            bound_size=Zb.shape[0],
            upper=upper,
            reference=reference,
            lower=float(bounds.lower[m - 1]),
            noise_log_lik=l_noise,
            alpha=alpha,
            lower_path=bounds.lower.clone(),
        )
        return Zb[:m].clone()


class AroundSelector:
    """A selector that decides around another one, ``selector``, whose size M it reports."""

    def __init__(self, selector: Selector):
        self.selector = selector

    @property
    def num_inducing(self) -> int | None:
        return getattr(self.selector, "num_inducing", None)


class KeepAfterFirst(AroundSelector):
    """Choose Z once, on the first batch, with ``selector``, and keep it afterwards, so that it moves only by
    gradient (POAM's Z-OPT ablation, Chen et al. 2024 §V-C: a random Z from the first batch).

    A first batch of fewer than ``MIN_FIRST_BATCH`` points cannot stand for the domain (a first batch of one point left
    M = 1 for good: RMSE 0.89 of the target's std after a stream of 100 single points). After such a batch, later
    updates (the context's ``num_updates`` > 0: a first update may select again, as POAM's pre-training rounds do) add points
    chosen by the selector from their batches, the inputs already there kept, for as long as Z holds every point seen
    (the context's ``num_data``) and fewer than the selector's ``num_inducing``. A first batch of at least ``MIN_FIRST_BATCH``
    points fixes Z as it always did, with M its size if below ``num_inducing``."""

    def __call__(
        self,
        kernel: Kernel,
        Z: Tensor | None,
        X: Tensor,
        *,
        generator: Generator | None = None,
        context: SelectionContext | None = None,
    ) -> Tensor:
        if Z is None or Z.shape[0] == 0:
            return self.selector(kernel, Z, X, generator=generator, context=context)
        missing = (self.num_inducing or 0) - Z.shape[0]
        updates, seen = (0, 0) if context is None else (context.num_updates, context.num_data)
        topping_up = Z.shape[0] < MIN_FIRST_BATCH or (Z.shape[0] == seen and updates > 1)
        if missing <= 0 or updates == 0 or not topping_up:
            return Z.clone()
        new = self.selector(kernel, None, X, generator=generator, context=context)[:missing]
        return unique_rows(torch.cat([Z, new]))


class KeptOrSelected(AroundSelector):
    """The old inducing inputs kept, or ``selector``'s new ones, whichever has the higher online bound on the batch
    (Bui et al. 2017; :func:`~onlinegp.objectives.online_bound`) under the current θ and σ² (ours; the local
    ensembles' members' default: WGPR's since 0.7.7, SOLAR-GP's since 0.7.8). A model that then moves Z by gradient
    starts from the better of the two, one that does not keeps it.

    Why: re-selected from [Z; X] at every batch (pivoted Cholesky), a member's M = 50 pseudo-inputs that the last fit
    had moved into place are traded for raw batch inputs and moved back by the next fit; where they already explain
    the batch as well, keeping them is the warmer start (see :class:`~onlinegp.models.wgpr.WGPR`). Where the batch lies
    elsewhere (a new lane of a survey), the selected set has the higher bound and is taken. Below the selector's
    ``num_inducing`` it adds inputs and keeps the old ones, so the selected set's bound is the higher one there too.
    The first batch, and a call without the batch's targets or a summary, take the selector's choice."""

    @torch.no_grad()
    def __call__(
        self,
        kernel: Kernel,
        Z: Tensor | None,
        X: Tensor,
        *,
        generator: Generator | None = None,
        context: SelectionContext | None = None,
    ) -> Tensor:
        selected = self.selector(kernel, Z, X, generator=generator, context=context)
        past = None if context is None or context.targets is None or Z is None else context.past()
        if past is None or (selected.shape == Z.shape and bool((selected == Z).all())):
            return selected

        def bound(inducing: Tensor) -> float:
            try:
                return float(online_bound(kernel, context.noise, inducing, X, context.targets, past))
            except CholeskyError:
                return -math.inf

        return Z.clone() if bound(Z) >= bound(selected) else selected


SELECTORS = {
    "pivoted": PivotedCholesky,
    "random": RandomSubset,
    "kmeans": KMeans,
    "resample": Resample,
    "random-first": lambda m: KeepAfterFirst(RandomSubset(m)),
    "pivoted-first": lambda m: KeepAfterFirst(PivotedCholesky(m)),
    "pivoted-or-kept": lambda m: KeptOrSelected(PivotedCholesky(m)),
    # adaptive size (Pescador-Barrios et al. 2024): the rule decides M, so the requested size is not used
    "vips": lambda _m: VIPSSelector(),
    "conditional-variance": lambda _m: ConditionalVariance(),
    "oips": lambda _m: OIPS(),
}


def make_selector(spec: str | Selector, num_inducing: int = 500) -> Selector:
    """A selector from its name ('pivoted', 'random', 'kmeans', ...) or an instance passed through."""
    if callable(spec) and not isinstance(spec, str):
        return spec
    try:
        return SELECTORS[spec](num_inducing)
    except KeyError:
        raise ValueError(f"unknown inducing selector {spec!r}: choose one of {sorted(SELECTORS)}") from None
