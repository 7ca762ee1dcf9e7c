"""POAM: Probabilistic Online Attentive Mapping (Chen et al. 2024, §IV, Algorithm 1), with PAM, FULL and ablations.

Per batch (X_n, y_n), in scaled units:

1. E-step, inducing inputs: a selector (default: first M pivots of a pivoted Cholesky of k([Z; X_n])).
2. E-step, data-dependent terms projected onto the new Z' (Eqs. 18-21), P = K_zz⁻¹ K_zz':
   a ← Pᵀ a + K_z'X_n y_n,  B ← Pᵀ B P + K_z'X_n K_X_n z'  (stored without σ⁻², since σ² is learnt), held by
   :class:`~onlinegp.projected.ProjectedTerms`.
3. E-step, q(u) analytically from (σ⁻² a, σ⁻² B) (Eqs. 7-8), kept in root form.
4. M-step: T Adam steps on the uncollapsed ELBO (Eq. 10) on mini-batches from all data, Z and q(u) fixed.

Variants are options of this class (the registry names them): ``terms="all"`` recomputes a, B from all data
(FULL); ``inducing_from="all"`` selects Z from all data too (PAM, offline). Ablations (§V-C):
``inducing="random"|"kmeans"`` (Z-RAND, k-means); ``inducing="random-first", optimize_inducing=True`` (Z-OPT:
a random Z from the first batch, then moved by gradient only); ``variational="gradient"`` (VAR-OPT: q(u) by
gradient, started from the analytic q). ``noise_weighted=True`` stores σ⁻²-weighted terms with the σ² of their
batch, and ``optimize_inducing=True`` refines the selector's Z by gradient (OVC, appendix A3).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from .. import health
from ..base import KernelGP, PhaseTimer, preset
from ..buffer import GrowingBuffer
from ..inducing import SelectionContext, Selector, make_selector
from ..kernels import CrossCovariance, diagonal, follow_inputs
from ..linalg import CholeskyError, cholesky, trisolve
from ..objectives import log_prior, svgp_elbo_cov
from ..posterior import KUU_JITTER, InducingPosterior, Predictor, VariationalQ, kuu, sketch_root
from ..projected import ProjectedTerms, batch_terms, kernel_theta
from ..training import (
    Pretraining,
    Trained,
    Training,
    gradient_steps,
    hyperparameter_optimizer,
    resolve_training,
    steps_for_width,
)
from .registry import register


@register("poam", "POAM: pivoted-Cholesky Z, projected terms, analytic q(u), Adam M-step (Chen et al. 2024)")
@register("z-rand", "POAM ablation: random Z", inducing="random")
@register("z-kmeans", "POAM ablation: k-means Z", inducing="kmeans")
@register(
    "z-opt",
    "POAM ablation: random Z from the first batch, then moved by gradient only",
    inducing="random-first",
    optimize_inducing=True,
)
@register("var-opt", "POAM ablation: q(u) by gradient", variational="gradient")
class POAM(Trained, KernelGP):
    """Online sparse GP with analytic variational E-step and stochastic M-step (POAM, Chen et al. 2024).

    Args:
        input_dim: number of input dimensions D.
        num_inducing: M, the fixed model size for the default pivoted-Cholesky selector (default 500).
        kernel: 'auto' (default: the Attentive Kernel up to 3 inputs, ARD RBF above), 'ak', 'rbf', 'matern32', ...
            or any gpytorch Kernel.
        inducing: a selector name ('pivoted', 'random', 'kmeans') or instance (e.g. a VIPS selector).
        training: a :class:`~onlinegp.training.Training` (or a dict of its fields) over :attr:`TRAINING`: ``steps``
            T, Adam steps per update (None, the default: 10, as Chen et al. 2024, §V-A, 50 above 3 inputs:
            :func:`~onlinegp.training.steps_for_width`; 0 freezes the hyper-parameters, and skips pre-training);
            ``batch_size``, the M-step's mini-batch (256); ``lr``, kernel and noise (1e-2); ``lr_network``, the AK's
            attention network (1e-3, Chen et al. 2024, §V-A); ``lr_variational``, Z and q(u) where moved by gradient
            (None: at ``lr``); ``pretrain``, :class:`~onlinegp.training.Pretraining` on the first batch: ``steps``
            M-step steps before it is absorbed (200; 0: none, the paper's Algorithm 1, whose hyper-parameters move
            only T steps per decision epoch by design, Chen et al. 2024 §IV-D), at ``lr`` (5e-2; the attention
            network's ``lr_network``, None: its online rate scaled by the same ratio) cosine-annealed to zero, with an
            E-step before every T of them so q(u) follows θ: few or large batches then start from fitted
            hyper-parameters instead of the initial ones (as WISKI's pre-training, Stanton et al. 2021, Table C.1).
            The mission simulator runs none: pre-training on a pilot survey hurt its missions
            (:data:`onlinegp.experiments.simulator.mission.MISSION_MODEL_OPTIONS`).
        terms: 'online' (POAM) or 'all' (FULL: terms recomputed from all data).
        inducing_from: 'online' (from [Z; X_new]) or 'all' (PAM).
        optimize_inducing: also move Z by gradient in the M-step (Z-OPT ablation, OVC).
        variational: 'analytic' (POAM) or 'gradient' (VAR-OPT ablation).
        noise_weighted: store σ⁻²-weighted terms with each batch's σ² (OVC).
        sketch: p (default 64), draw a fresh random sketch R Ω (:func:`~onlinegp.posterior.sketch_root`, p columns)
            of q's covariance root at every M-step Adam step; the ELBO is linear in S = R Rᵀ, so each step's gradient
            stays unbiased while its dense algebra shrinks from O(M³) to O(M²(p + batch)). None: the exact M-step
            of the paper. Not used with ``variational='gradient'`` (q is then a parameter of the M-step).
        noise: initial noise variance in scaled target units (default 1.0, as the paper's implementation starts;
            chosen by ``benchmarks/studies/study_poam_defaults.py``: the same final SMSE/MSLL as 0.1 over 15 missions and a
            lower mission-averaged SMSE, 12 of 15 paired by seed).
        **options: kernel_options, x_bounds, y_stats, dtype, as for every :class:`~onlinegp.base.KernelGP`;
            ``seed``: seed of the model's own random generator (mini-batches, sketches, random selectors) and of the
            attention network's initial weights.
    """

    _dynamic = ("Z", "projected", "q", "predictor")
    #: the defaults of ``training`` (``steps`` None: 10 per update, more above 3 inputs)
    TRAINING = Training(
        optimizer="adam", lr=1e-2, lr_network=1e-3, batch_size=256, pretrain=Pretraining(steps=200, lr=5e-2)
    )
    TRAINING_FIELDS = ("optimizer", "steps", "lr", "lr_network", "lr_variational", "batch_size", "pretrain")

    def __init__(
        self,
        input_dim: int | None = None,
        *,
        num_inducing: int = 500,
        kernel: Any = "auto",
        inducing: str | Selector = "pivoted",
        training: Training | dict | None = None,
        terms: str = "online",
        inducing_from: str = "online",
        optimize_inducing: bool = False,
        variational: str = "analytic",
        noise_weighted: bool = False,
        sketch: int | None = 64,
        noise: float = 1.0,
        **options: Any,
    ):
        super().__init__(input_dim, kernel=kernel, noise=noise, **options)
        for name, value, allowed in (
            ("terms", terms, ("online", "all")),
            ("inducing_from", inducing_from, ("online", "all")),
            ("variational", variational, ("analytic", "gradient")),
        ):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        self.training = resolve_training(training, self.TRAINING, type(self).__name__, self.TRAINING_FIELDS)
        if sketch is not None and (isinstance(sketch, bool) or int(sketch) < 1):
            raise ValueError(f"sketch must be a positive number of columns or None (exact), got {sketch!r}")
        self.sketch = None if sketch is None or variational == "gradient" else int(sketch)
        self.selector = make_selector(inducing, num_inducing)
        self._inducing_spec = inducing
        self.terms, self.inducing_from = terms, inducing_from
        self.optimize_inducing, self.variational, self.noise_weighted = optimize_inducing, variational, noise_weighted
        self.Z: Tensor | None = None
        self.projected: ProjectedTerms | None = None
        self.q: VariationalQ | None = None
        self.predictor: Predictor | None = None
        self._kuu_cache: tuple[Tensor, Tensor, Tensor] | None = None  # (Z, θ, chol K_uu): not state, a cache

    def options(self) -> dict[str, Any]:
        return {
            **super().options(),
            "num_inducing": getattr(self.selector, "num_inducing", None),
            "inducing": self._inducing_spec,
            "training": self.training,
            "terms": self.terms,
            "inducing_from": self.inducing_from,
            "optimize_inducing": self.optimize_inducing,
            "variational": self.variational,
            "noise_weighted": self.noise_weighted,
            "sketch": self.sketch,
        }

    def _build(self, input_dim: int) -> None:
        super()._build(input_dim)
        if self.num_steps is None:
            self.num_steps = steps_for_width(10, input_dim)
        self.data = GrowingBuffer(input_dim, self.dtype)
        self.optimizer = hyperparameter_optimizer(
            self.kernel, self.likelihood, self.training.lr, self.training.lr_network
        )

    @property
    def a(self) -> Tensor | None:
        """The stored K_zX y term at ``Z`` (see :class:`~onlinegp.projected.ProjectedTerms`)."""
        return None if self.projected is None else self.projected.a

    @property
    def B(self) -> Tensor | None:
        """The stored K_zX K_Xz term at ``Z``."""
        return None if self.projected is None else self.projected.B

    @torch.no_grad()
    def _follow(self, scale: Tensor, shift: Tensor) -> bool:
        """Inputs in wider units (:meth:`~onlinegp.base.OnlineGP._follow`): the kernel re-expressed
        (:func:`~onlinegp.kernels.follow_inputs`), the data moved, Z what the selector keeps of the moved Z under the
        kernel, and the terms a, B formed again from all data at it (the data are kept for the M-step; a projection
        assumes θ moved little, and the Attentive Kernel stretches with the range, as it would with the final range
        given as ``x_bounds``). With a stationary kernel the model is then the one it would be had the wider range
        been given from the start (to round-off, with OVC's terms weighted by the current σ²)."""
        if not follow_inputs(self.kernel, scale, shift):
            return False
        self.data.X = self.data.X * scale + shift
        Z = self.Z * scale + shift
        Z = self.selector(self.kernel, Z, Z[:0], generator=self.generator, context=self._selection_context(0))
        self._set_terms(Z, *self._terms_from_data(Z))
        self.q = self.projected.posterior(self.kernel, self.noise, self.jitter).q()
        self.predictor = Predictor.from_q(self.kernel, self.q, self.jitter)
        return True

    # ------------------------------------------------------------------ E-step
    @torch.no_grad()
    def _e_step(self, xs: Tensor, ys: Tensor) -> None:
        X_all, y_all = self.data.data
        source_Z, source_X = (None, X_all) if self.inducing_from == "all" else (self.Z, xs)
        context = self._selection_context(source_X.shape[0])
        Z_new = self.selector(self.kernel, source_Z, source_X, generator=self.generator, context=context)
        self._set_terms(Z_new, *self._terms_at(Z_new, xs, ys))
        if self.variational == "gradient" and self.q is not None:
            self.q = self._carry_q()
            return
        try:
            self.q = self.projected.posterior(self.kernel, self.noise, self.jitter).q()
        except CholeskyError:  # projected across a large change of θ, the terms lost positive definiteness
            if self.terms == "all":
                raise
            health.log.warning(
                "%s: projected terms not positive definite; formed again from all data", type(self).__name__
            )
            self._set_terms(Z_new, *self._terms_from_data(Z_new))
            self.q = self.projected.posterior(self.kernel, self.noise, self.jitter).q()

    @torch.no_grad()
    def _terms_from_data(self, Z: Tensor) -> tuple[Tensor, Tensor]:
        """(a, B) at ``Z`` from all data seen (kept for the M-step), under the current θ (and σ², with OVC's
        ``noise_weighted``)."""
        weight = 1.0 / self.noise if self.noise_weighted else 1.0
        return batch_terms(self.kernel, Z, *self.data.data, weight)

    @torch.no_grad()
    def _terms_at(self, Z_new: Tensor, xs: Tensor, ys: Tensor) -> tuple[Tensor, Tensor]:
        """(a, B) at ``Z_new`` including the batch: projected plus the batch's own (FULL: from all data)."""
        weight = 1.0 / self.noise if self.noise_weighted else 1.0
        if self.terms == "all" or self.projected is None:
            X_t, y_t = self.data.data if self.terms == "all" else (xs, ys)
            return batch_terms(self.kernel, Z_new, X_t, y_t, weight)
        a_old, B_old = self.projected.project(self.kernel, Z_new)
        a_new, B_new = batch_terms(self.kernel, Z_new, xs, ys, weight)
        return a_old + a_new, B_old + B_new

    @torch.no_grad()
    def _set_terms(self, Z: Tensor, a: Tensor, B: Tensor) -> None:
        self.Z = Z
        self.projected = ProjectedTerms(Z, a, B, self._root_kuu(Z), kernel_theta(self.kernel), self.noise_weighted)

    @torch.no_grad()
    def _root_kuu(self, Z: Tensor) -> Tensor:
        """chol(K_uu) at Z under the current θ, reusing the predictor's root when it was built for exactly these."""
        cached = self._kuu_cache
        if cached is not None and cached[0] is Z and torch.equal(cached[1], kernel_theta(self.kernel)):
            return cached[2]
        return cholesky(kuu(self.kernel, Z), self.jitter)

    def _remember_root(self, Z: Tensor, Lu: Tensor) -> None:
        self._kuu_cache = (Z, kernel_theta(self.kernel), Lu)

    @torch.no_grad()
    def _carry_q(self) -> VariationalQ:
        """VAR-OPT: start q at the new Z from the old q's predictive (then refined by gradient)."""
        mean, _, cov = self.predictor.predict(self.kernel, self.Z, full_cov=True)
        root = cholesky(0.5 * (cov + cov.mT), self.jitter)
        return VariationalQ(self.Z, mean, root, 2 * root.diagonal().abs().log().sum())

    def _selection_context(self, n: int) -> SelectionContext:
        """What the selector is told while this model absorbs the last ``n`` rows of its data buffer: their targets,
        σ², the q(u) of the terms so far and the mean and variance of all targets so far (both formed only if the
        selector asks: the VIPS selector does), and the model's counts."""
        _, y_all = self.data.data

        def past() -> InducingPosterior | None:
            return None if self.projected is None else self.projected.posterior(self.kernel, self.noise.detach())

        def moments() -> tuple[float, float]:
            var = float(y_all.var()) if y_all.numel() > 1 else 1.0
            return float(y_all.mean()), var if var > 0 else 1.0

        return SelectionContext(
            targets=y_all[y_all.shape[0] - n :],
            noise=self.noise.detach(),
            past=past,
            target_moments=moments,
            num_data=self.num_data,
            num_updates=self.num_updates,
        )

    # ------------------------------------------------------------------ M-step
    def _m_step_data(self) -> tuple[Tensor, Tensor]:
        """The data the M-step's mini-batches are drawn from: all data so far (Chen et al. 2024, §IV-C)."""
        return self.data.data

    def _m_step(self, optimizer: torch.optim.Optimizer, num_steps: int, schedules: tuple = ()) -> float | None:
        """``num_steps`` steps of ``optimizer`` (and its ``schedules``) on the ELBO of Chen et al. 2024, Eq. 10."""
        if num_steps == 0:
            return None
        X_all, y_all = self._m_step_data()
        n = X_all.shape[0]
        extra: list[torch.nn.Parameter] = []
        Z = self.Z
        if self.optimize_inducing:
            Z = torch.nn.Parameter(self.Z.clone())
            extra.append(Z)
        if self.variational == "gradient":
            white_mean, white_root = self._whitened(self.q)
            mean, root = torch.nn.Parameter(white_mean), torch.nn.Parameter(white_root)
            extra += [mean, root]
        optimizers = [optimizer] + ([torch.optim.Adam(extra, lr=self.training.rate("variational"))] if extra else [])
        batch_size = self.training.batch_size
        # Z-only kernel work done once for the T steps; K_uu carries kuu's ε
        cross = CrossCovariance(self.kernel, Z, jitter=KUU_JITTER.get(self.dtype, 1e-6))

        def elbo() -> Tensor:
            idx = (
                torch.randint(n, (min(batch_size, n),), generator=self.generator, device="cpu")
                if n > batch_size
                else torch.arange(n)
            )
            xb = X_all[idx]
            Kuu, Kub = cross(xb)
            if self.variational == "gradient":
                q = self._unwhitened(cholesky(Kuu, self.jitter), Z, mean, root)
            else:
                q = self.q
                if self.sketch is not None and self.sketch < q.root.shape[-1]:
                    q = VariationalQ(q.Z, q.mean, sketch_root(q.root, self.sketch, self.generator), q.logdet)
            data_term = svgp_elbo_cov(
                Kuu, Kub, diagonal(self.kernel, xb), self.noise, q.mean, q.root, q.logdet, y_all[idx], n, self.jitter
            )
            return data_term + log_prior(self.kernel) / n  # the ELBO is per datum

        value = gradient_steps(optimizers, elbo, num_steps, schedules=schedules)
        with torch.no_grad():
            if self.optimize_inducing:
                Z_moved = Z.detach().clone()
                self._set_terms(Z_moved, *self.projected.project(self.kernel, Z_moved))
                if self.variational == "analytic":
                    self.q = self.projected.posterior(self.kernel, self.noise, self.jitter).q()
            if self.variational == "gradient":
                self.q = self._unwhitened(self._root_kuu(self.Z), self.Z, mean.detach(), root.detach())
        return value

    @torch.no_grad()
    def _whitened(self, q: VariationalQ) -> tuple[Tensor, Tensor]:
        """VAR-OPT's parameters: q(u) = N(m, S) as q(v) = N(m_v, L_v L_vᵀ) with u = L_u v (the whitened form the
        paper's code optimises): m_v = L_u⁻¹ m and L_v = chol(L_u⁻¹ S L_u⁻ᵀ), lower-triangular (the analytic root
        R = L_u L_W⁻ᵀ is not, so its lower triangle would start from a wrong S). Adam's per-coordinate steps on the
        unwhitened m are amplified by K_uu⁻¹ in every prediction; on m_v they are not."""
        Lu = self._root_kuu(q.Z)
        white_root = trisolve(Lu, q.root)
        S_v = white_root @ white_root.mT
        return trisolve(Lu, q.mean), cholesky(0.5 * (S_v + S_v.mT), self.jitter)

    @staticmethod
    def _unwhitened(Lu: Tensor, Z: Tensor, white_mean: Tensor, white_root: Tensor) -> VariationalQ:
        """q(u) from whitened parameters: m = L_u m_v, root L_u L_v (lower-triangular), log|S| from both."""
        Lv = white_root.tril()
        logdet = 2 * (Lu.diagonal().log().sum() + Lv.diagonal().abs().clamp_min(1e-300).log().sum())
        return VariationalQ(Z, Lu @ white_mean, Lu @ Lv, logdet)

    # ------------------------------------------------------------------ protocol
    def _pretrain(self, xs: Tensor, ys: Tensor) -> None:
        """The first batch: ``training.pretrain.steps`` M-step steps at its ``lr`` cosine-annealed to zero, in rounds
        of ``num_steps`` each after an E-step; the batch's terms are then dropped (Z is kept), to be absorbed under the
        new θ."""
        online, pre = self.training, self.training.pretrain
        scale = pre.lr / online.lr if online.lr else 0.0  # lr 0 keeps θ where it is
        network = online.lr_network * scale if pre.lr_network is None else pre.lr_network
        adam = hyperparameter_optimizer(self.kernel, self.likelihood, online.lr * scale, network)
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(adam, T_max=pre.steps)
        rounds = max(self.num_steps, 1)
        for done in range(0, pre.steps, rounds):
            self._e_step(xs, ys)
            self._m_step(adam, min(rounds, pre.steps - done), (schedule,))
            for name in self._dynamic:
                if name != "Z":  # the next E-step chooses from Z and the batch, as every later update
                    setattr(self, name, None)

    def _update(self, xs: Tensor, ys: Tensor, timer: PhaseTimer) -> dict:
        self.data.append(xs, ys)
        if self.num_updates == 0 and self.training.pretrain.steps > 0 and self.num_steps > 0:  # 0 steps freeze θ
            with timer("pretraining"):
                self._pretrain(xs, ys)
        with timer("inducing+variational"):
            self._e_step(xs, ys)
        with timer("hyperparameters"):
            elbo = self._m_step(self.optimizer, self.num_steps)
        with timer("predictor"), torch.no_grad():
            self.predictor = Predictor.from_q(self.kernel, self.q, self.jitter)
            self._remember_root(self.q.Z, self.predictor.Lu)
        return {"objective": elbo, "noise": float(self.noise.detach())}

    def _predict(self, xs: Tensor, full_cov: bool) -> tuple[Tensor, Tensor, Tensor | None]:
        return self.predictor.predict(self.kernel, xs, full_cov)


@register("pam", "PAM: POAM's E/M steps recomputed from all data (offline)")
class PAM(POAM):
    """PAM (Chen et al. 2024, §IV-B): POAM's E/M steps recomputed from all data each time (offline, linear cost)."""

    def __init__(self, input_dim: int | None = None, **kwargs: Any):
        super().__init__(input_dim, **preset("PAM", kwargs, terms="all", inducing_from="all"))


@register("full", "FULL: POAM with the terms recomputed from all data")
class FULL(POAM):
    """FULL (Chen et al. 2024, §V): POAM with the data-dependent terms recomputed from all data."""

    def __init__(self, input_dim: int | None = None, **kwargs: Any):
        super().__init__(input_dim, **preset("FULL", kwargs, terms="all"))
