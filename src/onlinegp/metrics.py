"""Accuracy and calibration metrics (Chen et al. 2024, §V-A; Rasmussen & Williams 2006, §2.5).

All take tensors or arrays of the same length: targets ``y``, predictive ``mean`` and predictive variance of y
``var`` (noise included). ``y_train_mean``/``y_train_std`` define the naive reference for SMSE and MSLL.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import torch

LOG2PI = math.log(2 * math.pi)


def _np(*arrays):
    out = []
    for a in arrays:
        a = a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a, dtype=np.float64)
        out.append(a.astype(np.float64).reshape(-1))
    n = {a.shape[0] for a in out}
    if len(n) != 1:
        raise ValueError(f"metric inputs must have the same length, got {[a.shape[0] for a in out]}")
    return out


def rmse(y, mean) -> float:
    y, mean = _np(y, mean)
    return float(np.sqrt(np.mean((y - mean) ** 2)))


def mae(y, mean) -> float:
    y, mean = _np(y, mean)
    return float(np.mean(np.abs(y - mean)))


def smse(y, mean) -> float:
    """Mean squared error divided by the variance of the test targets (1 for predicting the test mean)."""
    y, mean = _np(y, mean)
    return float(np.mean((y - mean) ** 2) / np.var(y))


def nlpd(y, mean, var) -> float:
    """Mean negative log predictive density under N(mean, var)."""
    y, mean, var = _np(y, mean, var)
    return float(np.mean(0.5 * (LOG2PI + np.log(var) + (y - mean) ** 2 / var)))


def msll(y, mean, var, y_train_mean: float, y_train_std: float) -> float:
    """Mean standardised log loss: NLPD minus that of N(train mean, train variance); 0 for the naive model. NaN
    while the training targets have no spread (one training point): the naive model is then undefined."""
    if not y_train_std > 0:
        return float("nan")
    y, mean, var = _np(y, mean, var)
    model = 0.5 * (np.log(2 * np.pi * var) + (y - mean) ** 2 / var)
    naive_var = y_train_std**2
    naive = 0.5 * (np.log(2 * np.pi * naive_var) + (y - y_train_mean) ** 2 / naive_var)
    return float(np.mean(model - naive))


def calibration(y, mean, var, levels=(0.5, 0.8, 0.9, 0.95)) -> dict[float, float]:
    """Fraction of targets inside the central predictive interval of each level (ideal: the level itself)."""
    y, mean, var = _np(y, mean, var)
    z = np.abs(y - mean) / np.sqrt(var)
    return {float(p): float(np.mean(z <= NormalDist().inv_cdf(0.5 + p / 2))) for p in levels}


def all_metrics(y, mean, var, y_train_mean: float, y_train_std: float) -> dict[str, float]:
    """SMSE, MSLL, RMSE, NLPD and MAE in one dict."""
    return {
        "smse": smse(y, mean),
        "msll": msll(y, mean, var, y_train_mean, y_train_std),
        "rmse": rmse(y, mean),
        "nlpd": nlpd(y, mean, var),
        "mae": mae(y, mean),
    }
