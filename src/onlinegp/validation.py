"""Input checks at the library's boundary: user arrays to tensors, or a ValueError that says what to do."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor


def as_tensor_2d(x: Any, name: str, dtype: torch.dtype, width: int | None, keep_graph: bool = False) -> Tensor:
    """Convert user input to an ``(N, D)`` floating tensor or raise ValueError saying what is wrong.

    ``width`` None accepts any number of columns; ``keep_graph`` keeps a tensor's autograd graph (for gradients
    of predictions with respect to the inputs)."""
    if isinstance(x, Tensor):
        t = x if keep_graph else x.detach()
    else:
        try:
            arr = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"{name} must be numeric (a tensor, array or nested list of numbers), got {type(x).__name__}"
            ) from err
        t = torch.from_numpy(arr if arr.flags.writeable else arr.copy())  # read-only: a joblib memmap
    if not (t.is_floating_point() or t.dtype in (torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8)):
        raise ValueError(f"{name} must hold real numbers, got dtype {t.dtype}")
    t = t.to(dtype)
    if t.dim() == 1 and width == 1:
        t = t.unsqueeze(-1)
    if t.dim() != 2:
        raise ValueError(f"{name} must be 2-D with shape (N, D), got shape {tuple(t.shape)}")
    if width is not None and t.shape[1] != width:
        raise ValueError(
            f"{name} has {t.shape[1]} columns but the model has input_dim={width} (set by its "
            "constructor or first batch); pass inputs of that width or build a new model"
        )
    if t.shape[0] == 0:
        raise ValueError(f"{name} is empty: pass at least one row")
    if not bool(torch.isfinite(t).all()):
        bad = int((~torch.isfinite(t)).any(-1).sum())
        raise ValueError(f"{name} contains NaN or inf in {bad} row(s); drop or impute them before calling")
    return t


def floating_dtype(x: Any) -> torch.dtype | None:
    """The torch dtype of a floating tensor or array ``x``; None for anything else (lists, integers)."""
    dtype = getattr(x, "dtype", None)
    if isinstance(dtype, torch.dtype):
        return dtype if dtype.is_floating_point else None
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        return torch.from_numpy(np.empty(0, dtype)).dtype
    return None


def as_targets(y: Any, n: int, dtype: torch.dtype, name: str = "y") -> Tensor:
    """Convert user targets (or another per-row value, named ``name``) to an ``(N,)`` floating tensor matching ``n``
    rows of inputs, or raise ValueError."""
    if isinstance(y, Tensor):
        t = y.detach()
    else:
        try:
            arr = np.asarray(y, dtype=np.float64)
            t = torch.from_numpy(arr if arr.flags.writeable else arr.copy())
        except (TypeError, ValueError) as err:
            raise ValueError(f"{name} must be numeric, got {type(y).__name__}") from err
    if t.dtype == torch.bool or t.is_complex():
        raise ValueError(f"{name} must hold real numbers, got dtype {t.dtype}")
    t = t.to(dtype)
    if t.dim() == 2 and t.shape[1] == 1:
        t = t[:, 0]
    if t.dim() != 1:
        raise ValueError(f"{name} must be 1-D (N,) or (N, 1), got shape {tuple(t.shape)}")
    if t.shape[0] != n:
        raise ValueError(f"x has {n} rows but {name} has {t.shape[0]}; they must match")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains {int((~torch.isfinite(t)).sum())} NaN or inf value(s)")
    return t


def as_noise_variances(noise: Any, n: int, dtype: torch.dtype) -> Tensor:
    """Convert per-point observation noise variances to an ``(N,)`` tensor matching ``n`` rows of inputs, or raise
    ValueError (wrong shape, NaN or inf, or not positive)."""
    t = as_targets(noise, n, dtype, "noise")
    if not bool((t > 0).all()):
        raise ValueError(f"noise variances must be positive; {int((t <= 0).sum())} of {n} are not")
    return t
