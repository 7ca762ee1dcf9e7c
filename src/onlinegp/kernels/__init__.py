"""Kernels: the Attentive Kernel, plus helpers to evaluate any gpytorch kernel to dense tensors."""

from __future__ import annotations

import gpytorch
import torch
from torch import Tensor

from .attentive import AttentiveKernel

__all__ = ["AttentiveKernel", "dense", "diagonal", "make_kernel", "lengthscale_map"]


def dense(kernel: gpytorch.kernels.Kernel, x1: Tensor, x2: Tensor | None = None) -> Tensor:
    """k(x1, x2) as a dense tensor (the online math here is small dense linear algebra)."""
    return kernel(x1, x1 if x2 is None else x2).to_dense()


def diagonal(kernel: gpytorch.kernels.Kernel, x: Tensor) -> Tensor:
    """k(x, x) for each row of x."""
    return kernel(x, diag=True)


def make_kernel(name: str | gpytorch.kernels.Kernel, input_dim: int, dtype: torch.dtype = torch.float64,
                **options) -> gpytorch.kernels.Kernel:
    """Build a scaled kernel by name: 'ak' (Attentive), 'rbf', 'matern12', 'matern32', 'matern52'.

    A gpytorch ``Kernel`` instance is returned as is (moved to ``dtype``). For the stationary kernels,
    ``lengthscale`` sets the initial length-scale and ``ard=False`` shares one length-scale across dimensions
    (default: one per dimension).
    """
    if isinstance(name, gpytorch.kernels.Kernel):
        return name.to(dtype)
    key = str(name).lower()
    if key in ("ak", "attentive"):
        base = AttentiveKernel(input_dim, **options)
    elif key == "rbf":
        base = gpytorch.kernels.RBFKernel(ard_num_dims=input_dim if options.get("ard", True) else None)
        base.lengthscale = options.get("lengthscale", 0.3)
    elif key.startswith("matern"):
        nu = {"matern12": 0.5, "matern32": 1.5, "matern52": 2.5}.get(key)
        if nu is None:
            raise ValueError(f"unknown kernel {name!r}: choose ak, rbf, matern12, matern32 or matern52")
        base = gpytorch.kernels.MaternKernel(nu=nu, ard_num_dims=input_dim if options.get("ard", True) else None)
        base.lengthscale = options.get("lengthscale", 0.3)
    else:
        raise ValueError(f"unknown kernel {name!r}: choose ak, rbf, matern12, matern32 or matern52")
    return gpytorch.kernels.ScaleKernel(base).to(dtype)


def lengthscale_map(kernel: gpytorch.kernels.Kernel, x: Tensor) -> Tensor:
    """Length-scale at each input: attention-weighted for the AK, the (mean ARD) constant otherwise."""
    base = getattr(kernel, "base_kernel", kernel)
    if isinstance(base, AttentiveKernel):
        return base.lengthscale_at(x)
    ls = getattr(base, "lengthscale", None)
    if ls is None:
        raise ValueError(f"{type(base).__name__} has no length-scale to map")
    return ls.detach().mean().expand(x.shape[0])
