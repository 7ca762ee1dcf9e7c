"""POAM: Probabilistic Online Attentive Mapping (paper 000, §IV, Algorithm 1), with PAM, FULL and ablations.

Per batch (X_n, y_n), in scaled units:

1. E-step, inducing inputs: a selector (default: first M pivots of a pivoted Cholesky of k([Z; X_n])).
2. E-step, data-dependent terms projected onto the new Z' (Eqs. 18-21), P = K_zz⁻¹ K_zz':
   a ← Pᵀ a + K_z'X_n y_n,  B ← Pᵀ B P + K_z'X_n K_X_n z'  (stored without σ⁻², since σ² is learnt).
3. E-step, q(u) analytically from (σ⁻² a, σ⁻² B) (Eqs. 7-8), kept in root form.
4. M-step: T Adam steps on the uncollapsed ELBO (Eq. 10) on mini-batches from all data, Z and q(u) fixed.

Variants by switches: ``terms="all"`` recomputes a, B from all data (FULL); ``inducing_from="all"`` selects Z from
all data too (PAM, offline). Ablations (§V-C): ``inducing="random"|"kmeans"`` (Z-RAND, k-means),
``optimize_inducing=True`` (Z-OPT; OVC), ``variational="gradient"`` (VAR-OPT). ``noise_weighted=True`` stores
σ⁻²-weighted terms with the σ² of their batch (OVC, appendix A3).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..base import GrowingBuffer, OnlineGP, PhaseTimer, hyperparameter_optimizer
from ..inducing import Selector, make_selector
from ..kernels import CrossCovariance, dense, diagonal, make_kernel
from ..linalg import cholesky, trisolve
from ..objectives import svgp_elbo_cov
from ..posterior import (InducingPosterior, Predictor, VariationalQ, kuu, kuv, project_terms, sketch_root,
                         with_jitter)


class POAM(OnlineGP):
    """Online sparse GP with analytic variational E-step and stochastic M-step (POAM, paper 000).

    Args:
        input_dim: number of input dimensions D.
        num_inducing: M, the fixed model size for the default pivoted-Cholesky selector (default 500).
        kernel: 'ak' (default, Attentive Kernel), 'rbf', 'matern32', ... or any gpytorch Kernel.
        inducing: a selector name ('pivoted', 'random', 'kmeans') or instance (e.g. a VIPS selector).
        num_steps: T, Adam steps per update (default 10); 0 freezes the hyper-parameters.
        batch_size: mini-batch size for the M-step (default 256).
        lr: learning rate for kernel and noise (default 1e-2); ``lr_attention`` for the AK's network (1e-3).
        terms: 'online' (POAM) or 'all' (FULL: terms recomputed from all data).
        inducing_from: 'online' (from [Z; X_new]) or 'all' (PAM).
        optimize_inducing: also move Z by gradient in the M-step (Z-OPT ablation, OVC).
        variational: 'analytic' (POAM) or 'gradient' (VAR-OPT ablation).
        noise_weighted: store σ⁻²-weighted terms with each batch's σ² (OVC).
        sketch: p (default 64), draw a fresh random sketch R Ω (:func:`~onlinegp.posterior.sketch_root`, p columns)
            of q's covariance root at every M-step Adam step; the ELBO is linear in S = R Rᵀ, so each step's gradient
            stays unbiased while its dense algebra shrinks from O(M³) to O(M²(p + batch)). None: the exact M-step
            of the paper. Not used with ``variational='gradient'`` (q is then a parameter of the M-step).
        x_bounds: optional (2, D) corners of the input domain for scaling; else fitted on the first batch.
        seed: seed of the model's own random generator (mini-batches, sketches, random selectors); the attention
            network's initial weights come from torch's global generator, like any nn.Module (torch.manual_seed).
    """

    _dynamic = ("Z", "a", "B", "q", "predictor", "Lu_terms", "theta_terms")

    def __init__(self, input_dim: int, num_inducing: int = 500, kernel: Any = "ak", inducing: str | Selector = "pivoted",
                 num_steps: int = 10, batch_size: int = 256, lr: float = 1e-2, lr_attention: float = 1e-3,
                 terms: str = "online", inducing_from: str = "online", optimize_inducing: bool = False,
                 variational: str = "analytic", noise_weighted: bool = False, noise: float = 0.1,
                 sketch: int | None = 64, x_bounds: Any = None, y_stats: tuple[float, float] | None = None,
                 seed: int = 0, dtype: torch.dtype = torch.float64, kernel_options: dict | None = None):
        super().__init__(input_dim, x_bounds=x_bounds, dtype=dtype, seed=seed, noise=noise, y_stats=y_stats)
        for name, value, allowed in (("terms", terms, ("online", "all")), ("inducing_from", inducing_from, ("online", "all")),
                                     ("variational", variational, ("analytic", "gradient"))):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        if num_steps < 0 or batch_size < 1:
            raise ValueError("num_steps must be >= 0 and batch_size >= 1")
        if sketch is not None and (isinstance(sketch, bool) or int(sketch) < 1):
            raise ValueError(f"sketch must be a positive number of columns or None (exact), got {sketch!r}")
        self.sketch = None if sketch is None or variational == "gradient" else int(sketch)
        self.kernel = make_kernel(kernel, input_dim, dtype, **(kernel_options or {}))
        self.selector = make_selector(inducing, num_inducing)
        self.num_steps, self.batch_size = int(num_steps), int(batch_size)
        self.terms, self.inducing_from = terms, inducing_from
        self.optimize_inducing, self.variational, self.noise_weighted = optimize_inducing, variational, noise_weighted
        self.Z: Tensor | None = None
        self.a: Tensor | None = None
        self.B: Tensor | None = None
        self.q: VariationalQ | None = None
        self.predictor: Predictor | None = None
        # root of K_zz and θ under which the stored terms a, B are expressed (K' of Eqs. 16-19)
        self.Lu_terms: Tensor | None = None
        self.theta_terms: Tensor | None = None
        self._kuu_cache: tuple[Tensor, Tensor, Tensor] | None = None  # (Z, θ, chol K_uu): not state, a cache
        self.data = GrowingBuffer(input_dim, dtype)
        self.optimizer = hyperparameter_optimizer(self.kernel, self.likelihood, lr, lr_attention)
        self.lr = lr

    # ------------------------------------------------------------------ E-step
    @torch.no_grad()
    def _new_terms(self, Z: Tensor, X: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        Kzx = dense(self.kernel, Z, X)
        scale = 1.0 / self.noise if self.noise_weighted else 1.0
        return scale * (Kzx @ y), scale * (Kzx @ Kzx.mT)

    @torch.no_grad()
    def _e_step(self, xs: Tensor, ys: Tensor) -> None:
        X_all, y_all = self.data.data
        source_Z, source_X = (None, X_all) if self.inducing_from == "all" else (self.Z, xs)
        Z_new = self.selector(self.kernel, source_Z, source_X, generator=self.generator, model=self)
        if self.terms == "all" or self.Z is None:
            X_t, y_t = (X_all, y_all) if self.terms == "all" else (xs, ys)
            self.a, self.B = self._new_terms(Z_new, X_t, y_t)
        else:
            self._project_terms(Z_new)
            a_n, B_n = self._new_terms(Z_new, xs, ys)
            self.a, self.B = self.a + a_n, self.B + B_n
        old_q, self.Z = self.q, Z_new
        self.Lu_terms, self.theta_terms = self._root_kuu(self.Z), self._theta()
        if self.variational == "gradient" and old_q is not None:
            self.q = self._carry_q(old_q)
        else:
            prec = 1.0 if self.noise_weighted else 1.0 / self.noise
            post = InducingPosterior.from_terms(self.kernel, self.Z, prec * self.a, prec * self.B, self.jitter,
                                                Lu=self.Lu_terms)
            self.q = post.q()

    @torch.no_grad()
    def _project_terms(self, Z_new: Tensor) -> None:
        """Eqs. 16-21: P = K'_zz⁻¹ K_zz', K' under the θ the stored terms were formed with, K under the current θ.

        When θ has not changed since (no M-step in between) kept inducing inputs carry their terms over exactly.
        """
        if self.theta_terms is None or torch.equal(self.theta_terms, self._theta()):
            Lu = self._root_kuu(self.Z) if self.Lu_terms is None else self.Lu_terms
            self.a, self.B = project_terms(self.kernel, self.Z, Z_new, Lu, self.a, self.B)
            return
        P = trisolve(self.Lu_terms, trisolve(self.Lu_terms, kuv(self.kernel, self.Z, Z_new)), transpose=True)
        B = P.mT @ self.B @ P
        self.a, self.B = P.mT @ self.a, 0.5 * (B + B.mT)

    def _theta(self) -> Tensor:
        return torch.cat([p.detach().reshape(-1) for p in self.kernel.parameters()])

    @torch.no_grad()
    def _root_kuu(self, Z: Tensor) -> Tensor:
        """chol(K_uu) at Z under the current θ, reusing the predictor's root when it was built for exactly these."""
        theta = self._theta()
        cached = self._kuu_cache
        if cached is not None and cached[0] is Z and torch.equal(cached[1], theta):
            return cached[2]
        return cholesky(kuu(self.kernel, Z), self.jitter)

    def _remember_root(self, Z: Tensor, Lu: Tensor) -> None:
        self._kuu_cache = (Z, self._theta(), Lu)

    @torch.no_grad()
    def _carry_q(self, q: VariationalQ) -> VariationalQ:
        """VAR-OPT: start q at the new Z from the old q's predictive (then refined by gradient)."""
        mean, _, cov = self.predictor.predict(self.kernel, self.Z, full_cov=True)
        root = cholesky(0.5 * (cov + cov.mT), self.jitter)
        return VariationalQ(self.Z, mean, root, 2 * root.diagonal().abs().log().sum())

    # ------------------------------------------------------------------ M-step
    def _m_step(self) -> float | None:
        if self.num_steps == 0:
            return None
        X_all, y_all = self.data.data
        n = X_all.shape[0]
        extra: list[torch.nn.Parameter] = []
        Z = self.Z
        if self.optimize_inducing:
            Z = torch.nn.Parameter(self.Z.clone())
            extra.append(Z)
        if self.variational == "gradient":
            mean = torch.nn.Parameter(self.q.mean.clone())
            root = torch.nn.Parameter(self.q.root.tril().clone())
            extra += [mean, root]
        opt_extra = torch.optim.Adam(extra, lr=self.lr) if extra else None
        cross = CrossCovariance(self.kernel, Z)  # Z-only kernel work done once for the T steps
        value = None
        for _ in range(self.num_steps):
            idx = torch.randint(n, (min(self.batch_size, n),), generator=self.generator) if n > self.batch_size \
                else torch.arange(n)
            if self.variational == "gradient":
                L = root.tril()
                q = VariationalQ(Z, mean, L, 2 * L.diagonal().abs().clamp_min(1e-12).log().sum())
            else:
                q = self.q
                if self.sketch is not None and self.sketch < q.root.shape[-1]:
                    q = VariationalQ(q.Z, q.mean, sketch_root(q.root, self.sketch, self.generator), q.logdet)
            self.optimizer.zero_grad(set_to_none=True)
            if opt_extra is not None:
                opt_extra.zero_grad(set_to_none=True)
            xb = X_all[idx]
            Kuu, Kub = cross(xb)
            elbo = svgp_elbo_cov(with_jitter(Kuu), Kub, diagonal(self.kernel, xb), self.noise, q.mean, q.root,
                                 q.logdet, y_all[idx], n, self.jitter)
            (-elbo).backward()
            self.optimizer.step()
            if opt_extra is not None:
                opt_extra.step()
            value = float(elbo.detach())
        with torch.no_grad():
            if self.optimize_inducing:
                self._project_terms(Z.detach().clone())
                self.Z = Z.detach().clone()
                self.Lu_terms, self.theta_terms = self._root_kuu(self.Z), self._theta()
                if self.variational == "analytic":
                    prec = 1.0 if self.noise_weighted else 1.0 / self.noise
                    self.q = InducingPosterior.from_terms(self.kernel, self.Z, prec * self.a, prec * self.B,
                                                          self.jitter).q()
            if self.variational == "gradient":
                L = root.detach().tril()
                self.q = VariationalQ(self.Z, mean.detach().clone(), L, 2 * L.diagonal().abs().log().sum())
        return value

    # ------------------------------------------------------------------ protocol
    def _update(self, xs: Tensor, ys: Tensor, timer: PhaseTimer) -> dict:
        self.data.append(xs, ys)
        with timer("inducing+variational"):
            self._e_step(xs, ys)
        with timer("hyperparameters"):
            elbo = self._m_step()
        with timer("predictor"), torch.no_grad():
            self.predictor = Predictor.from_q(self.kernel, self.q, self.jitter)
            self._remember_root(self.q.Z, self.predictor.Lu)
        return {"objective": elbo, "noise": float(self.noise.detach())}

    def _predict(self, xs: Tensor, full_cov: bool):
        return self.predictor.predict(self.kernel, xs, full_cov)


class PAM(POAM):
    """PAM (paper 000 §IV-B): POAM's E/M steps recomputed from all data each time (offline, linear cost)."""

    def __init__(self, input_dim: int, **kwargs):
        super().__init__(input_dim, terms="all", inducing_from="all", **kwargs)


class FULL(POAM):
    """FULL (paper 000 §V): POAM with the data-dependent terms recomputed from all data."""

    def __init__(self, input_dim: int, **kwargs):
        super().__init__(input_dim, terms="all", **kwargs)
