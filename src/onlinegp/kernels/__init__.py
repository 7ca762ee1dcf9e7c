"""Kernels: the Attentive Kernel, plus helpers to evaluate any gpytorch kernel to dense tensors."""

from __future__ import annotations

import math

import gpytorch
import torch
from torch import Tensor

from . import native
from .attentive import AttentiveKernel, plus_jitter, sqdist
from .product_matern import ProductMatern52Kernel

__all__ = [
    "AttentiveKernel",
    "ProductMatern52Kernel",
    "CrossCovariance",
    "default_lengthscale",
    "default_lengthscale_prior",
    "dense",
    "diagonal",
    "follow_inputs",
    "make_kernel",
    "lengthscale_map",
]


def _evaluate(kernel: gpytorch.kernels.Kernel, x1: Tensor, x2: Tensor, diag: bool = False) -> Tensor:
    """The kernel's ``forward`` called directly (skipping gpytorch's lazy ``__call__`` machinery in hot paths),
    falling back to ``__call__`` for kernels that select input dimensions."""
    if kernel.active_dims is None:
        out = kernel.forward(x1, x2, diag=diag)
    else:
        out = kernel(x1, x2, diag=diag)
    return out if isinstance(out, Tensor) else out.to_dense()


def dense(kernel: gpytorch.kernels.Kernel, x1: Tensor, x2: Tensor | None = None) -> Tensor:
    """k(x1, x2) as a dense tensor (the online math here is small dense linear algebra)."""
    return _evaluate(kernel, x1, x1 if x2 is None else x2)


def diagonal(kernel: gpytorch.kernels.Kernel, x: Tensor) -> Tensor:
    """k(x, x) for each row of x."""
    return _evaluate(kernel, x, x, diag=True)


class CrossCovariance:
    """k(Z, Z) and k(Z, X) for fixed inputs Z under changing hyper-parameters (an optimiser's steps).

    For the Attentive Kernel (bare or in a ``ScaleKernel``) the parts that depend on Z alone are computed once:
    the squared distances and, when they fit in ``cache_limit`` numbers and the compiled kernel (which recomputes
    them faster than it could read them) is not in use, the base kernels' exponentials; each call
    then evaluates the attention network once on [Z; X]. If Z requires grad (inducing inputs being optimised)
    nothing is cached. Any other kernel is evaluated as ``dense(kernel, Z, [Z; X])``. Values equal
    ``dense(kernel, Z)`` (plus εI with ``jitter``) and ``dense(kernel, Z, X)`` to round-off, gradients included. The
    AK's output scale and ε are applied inside its compiled routine's autograd function (no separate M × M passes).
    """

    def __init__(self, kernel: gpytorch.kernels.Kernel, Z: Tensor, cache_limit: int = 2**23, jitter: float = 0.0):
        self.kernel, self.Z, self.jitter = kernel, Z, jitter
        base = kernel.base_kernel if isinstance(kernel, gpytorch.kernels.ScaleKernel) else kernel
        self.ak = base if isinstance(base, AttentiveKernel) and kernel.active_dims is None else None
        self.sq = self.exps = None
        if self.ak is not None and not Z.requires_grad:
            with torch.no_grad():
                self.sq = sqdist(Z, Z)
                if self.ak.lengthscales.numel() * self.sq.numel() <= cache_limit and not native.usable(self.sq):
                    self.exps = self.ak.exponentials(self.sq)

    def __call__(self, X: Tensor) -> tuple[Tensor, Tensor]:
        """(K_ZZ + εI, K_ZX) under the kernel's current parameters, ε = ``jitter`` times the mean diagonal of K_ZZ
        (not differentiated: :func:`~onlinegp.posterior.with_jitter` with ``jitter`` = its ``KUU_JITTER``)."""
        Z, M = self.Z, self.Z.shape[0]
        if self.ak is None:
            K = dense(self.kernel, Z, torch.cat([Z, X]))
            return plus_jitter(K[:, :M], self.jitter), K[:, M:]
        w = self.ak.weights(torch.cat([Z, X]))
        wz, wx = w[:M], w[M:]
        sq = sqdist(Z, Z) if self.sq is None else self.sq
        scale = None if self.ak is self.kernel else self.kernel.outputscale
        Kzz = self.ak.combine(wz, wz, sq, self.exps, scale, self.jitter)
        return Kzz, self.ak.combine(wz, wx, sqdist(Z, X), scale=scale)


#: 'auto' uses the Attentive Kernel up to this many inputs: it is a mapping kernel (Chen et al. 2024) whose
#: length-scales are shared by all inputs, so above a few inputs, where inputs differ in relevance, ARD RBF wins
#: (elevators, 18 inputs, 2000 points: POAM with the AK test RMSE 0.80 in a user's report, about the mean
#: predictor; with ARD RBF 0.39 against the exact GP's 0.38 in ``onlinegp bench defaults``)
MAX_AK_INPUTS = 3


def default_lengthscale(input_dim: int) -> float:
    """Initial length-scale of the stationary kernels in scaled units (inputs in [-1, 1]): 0.3 up to 3 inputs (the
    mapping settings of Chen et al. 2024), 0.3·√(D/2) above, so that typical distances between points stay a few
    length-scales whatever D (the √D scaling of Hvarfner et al. 2024). Started at 0.3 in 32 dimensions every pair of
    points is ~10 length-scales apart, the kernel matrix is the identity to round-off, the gradients in the
    length-scales vanish and the model stays at the mean predictor."""
    return 0.3 if input_dim <= 3 else 0.3 * math.sqrt(input_dim / 2)


#: width σ of the log-normal length-scale prior above ``MAX_AK_INPUTS`` inputs (Hvarfner et al. 2024: √3)
LENGTHSCALE_PRIOR_WIDTH = math.sqrt(3.0)


def default_lengthscale_prior(input_dim: int) -> gpytorch.priors.LogNormalPrior | None:
    """The prior on each ARD length-scale of the stationary kernels above ``MAX_AK_INPUTS`` inputs (None up to it,
    keeping the mapping settings of Chen et al. 2024): log-normal of width √3 whose location grows with ½ log D, as
    in Hvarfner et al. 2024 (BoTorch's default), placed so that its mode is the start :func:`default_lengthscale`.

    Every method adds log p(θ) to the objective of each hyper-parameter fit. Without it a length-scale fitted on a
    small first batch can run off to 1e5 (the input looks irrelevant in 100 points), where its gradient vanishes, so
    the input stays switched off for the rest of the stream: on pumadyn32nm (32 inputs) OSGPR's third relevant
    input did, and its test RMSE stayed at 1.36x the exact GP's for all 20 batches."""
    if input_dim <= MAX_AK_INPUTS:
        return None
    width = LENGTHSCALE_PRIOR_WIDTH
    return gpytorch.priors.LogNormalPrior(math.log(default_lengthscale(input_dim)) + width**2, width)


def kernel_name(name: str, input_dim: int) -> str:
    """The kernel a name stands for at this input width: 'auto' resolved (see :func:`make_kernel`), lower case."""
    key = str(name).lower()
    if key == "auto":
        return "ak" if input_dim <= MAX_AK_INPUTS else "rbf"
    return key


def make_kernel(
    name: str | gpytorch.kernels.Kernel, input_dim: int, dtype: torch.dtype = torch.float64, **options
) -> gpytorch.kernels.Kernel:
    """Build a scaled kernel by name: 'ak' (Attentive), 'rbf', 'matern12', 'matern32', 'matern52',
    'matern52-product' (∏_d of 1-D Matérn-5/2 kernels with one length-scale: what gpytorch's grid kernels make of a
    Matérn, so the kernel of Stanton et al.'s WISKI code for Bayesian optimisation), or 'auto': the Attentive Kernel
    up to ``MAX_AK_INPUTS`` inputs, ARD RBF above.

    A gpytorch ``Kernel`` instance is returned as is (moved to ``dtype``). For the stationary kernels,
    ``lengthscale`` sets the initial length-scale and ``ard=False`` shares one length-scale across dimensions
    (default: one per dimension); the initial length-scale defaults to :func:`default_lengthscale`, and
    ``lengthscale_prior`` (a gpytorch prior, or None for none) to :func:`default_lengthscale_prior`.
    """
    if isinstance(name, gpytorch.kernels.Kernel):
        return name.to(dtype)
    key = kernel_name(name, input_dim)
    if key in ("ak", "attentive"):
        base = AttentiveKernel(input_dim, **options)
        return gpytorch.kernels.ScaleKernel(base).to(dtype)
    prior = options.get("lengthscale_prior", default_lengthscale_prior(input_dim))
    priors = {} if prior is None else {"lengthscale_prior": prior}
    if key == "rbf":
        base = gpytorch.kernels.RBFKernel(ard_num_dims=input_dim if options.get("ard", True) else None, **priors)
        base.lengthscale = options.get("lengthscale", default_lengthscale(input_dim))
    elif key == "matern52-product":
        base = ProductMatern52Kernel(**priors)
        base.lengthscale = options.get("lengthscale", default_lengthscale(input_dim))
    elif key.startswith("matern"):
        nu = {"matern12": 0.5, "matern32": 1.5, "matern52": 2.5}.get(key)
        if nu is None:
            raise ValueError(
                f"unknown kernel {name!r}: choose auto, ak, rbf, matern12, matern32, matern52 or matern52-product"
            )
        base = gpytorch.kernels.MaternKernel(
            nu=nu, ard_num_dims=input_dim if options.get("ard", True) else None, **priors
        )
        base.lengthscale = options.get("lengthscale", default_lengthscale(input_dim))
    else:
        raise ValueError(
            f"unknown kernel {name!r}: choose auto, ak, rbf, matern12, matern32, matern52 or matern52-product"
        )
    return gpytorch.kernels.ScaleKernel(base).to(dtype)


#: kernels that are functions of (x - x') / ℓ alone, so ℓ carries their whole dependence on the inputs' units
STATIONARY = (
    gpytorch.kernels.RBFKernel,
    gpytorch.kernels.MaternKernel,
    gpytorch.kernels.RQKernel,
    ProductMatern52Kernel,
)


@torch.no_grad()
def follow_inputs(kernel: gpytorch.kernels.Kernel, scale: Tensor, shift: Tensor) -> bool:
    """Re-express ``kernel`` (bare or in a ``ScaleKernel``) for inputs ``x' = scale * x + shift`` (per column);
    False, changing nothing, where it cannot. A stationary kernel's length-scales are multiplied by ``scale``, so it
    is the same function of the same places, exactly (one length-scale shared by all columns only when ``scale`` is
    the same for all). The Attentive Kernel is left as it is: its fixed length-scales and its attention network are
    functions of the scaled inputs, so both stretch with the range, as they would with the final range given as
    ``x_bounds`` (Chen et al. 2024 scale the inputs to the task extent). Composing the network with the change of
    units instead (so each place kept its weights) left it as sharp over the whole area as over the first batch's few
    metres: SMSE 1.5x that of hindsight bounds on the magnetometer survey and Env2's mission, against 1.07x and 1.05x
    (benchmarks/studies/study_vehicle_order.py)."""
    base = getattr(kernel, "base_kernel", kernel)
    if kernel.active_dims is not None or base.active_dims is not None:
        return False
    if isinstance(base, AttentiveKernel):
        return True
    if not isinstance(base, STATIONARY):
        return False
    lengthscale = base.lengthscale
    if lengthscale.shape[-1] == scale.numel():
        base.lengthscale = lengthscale * scale
    elif bool((scale == scale[0]).all()):
        base.lengthscale = lengthscale * scale[0]
    else:
        return False
    return True


def lengthscale_map(kernel: gpytorch.kernels.Kernel, x: Tensor) -> Tensor:
    """Length-scale at each input: attention-weighted for the AK, the (mean ARD) constant otherwise."""
    base = getattr(kernel, "base_kernel", kernel)
    if isinstance(base, AttentiveKernel):
        return base.lengthscale_at(x)
    ls = getattr(base, "lengthscale", None)
    if ls is None:
        raise ValueError(f"{type(base).__name__} has no length-scale to map")
    return ls.detach().mean().expand(x.shape[0])
