"""The one interface every method implements (:class:`OnlineGP`) and what it shares.

A model receives raw user units; :class:`~onlinegp.scaling.Scaler` maps them to the scaled space where all
GP math happens. ``update`` validates first, then runs the method's ``_update`` inside a transaction: if anything
fails the model is restored to exactly its previous state. ``state_dict``/``load_state_dict`` are exact
checkpoints: variable-size tensors (inducing inputs, stored terms, data buffers), optimiser moments and the
model's random generator travel in the module's extra state.
"""

from __future__ import annotations

import copy
import time
from abc import ABCMeta, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Protocol, runtime_checkable

import gpytorch
import numpy as np
import torch
from torch import Tensor, nn

from .kernels import lengthscale_map
from .linalg import JitterLog
from .scaling import Scaler

DEFAULT_DTYPE = torch.float64


@dataclass
class Prediction:
    """Predictive distribution in user units: latent ``f`` and noisy ``y`` marginals (and ``cov`` of f if asked)."""

    mean: Tensor
    var_f: Tensor
    var_y: Tensor
    cov_f: Tensor | None = None

    @property
    def std_y(self) -> Tensor:
        return self.var_y.sqrt()


@dataclass
class UpdateReport:
    """What one ``update`` did: sizes, seconds per phase, objective values, jitter added."""

    num_data: int
    num_inducing: int | None
    timings: dict[str, float] = field(default_factory=dict)
    objective: float | None = None
    jitter: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def total_time(self) -> float:
        return float(sum(self.timings.values()))


@runtime_checkable
class OnlineGPProtocol(Protocol):
    def update(self, x: Tensor, y: Tensor) -> UpdateReport: ...

    def predict(self, x: Tensor, full_cov: bool = False) -> Prediction: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> Any: ...


class PhaseTimer:
    """Accumulates wall-clock seconds per named phase."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - t0


def as_tensor_2d(x: Any, name: str, dtype: torch.dtype, width: int | None) -> Tensor:
    """Convert user input to an ``(N, D)`` floating tensor or raise ValueError saying what is wrong."""
    if isinstance(x, Tensor):
        t = x.detach()
    else:
        try:
            arr = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{name} must be numeric (a tensor, array or nested list of numbers), got {type(x).__name__}") from err
        t = torch.from_numpy(arr)
    if not (t.is_floating_point() or t.dtype in (torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8)):
        raise ValueError(f"{name} must hold real numbers, got dtype {t.dtype}")
    t = t.to(dtype)
    if t.dim() == 1 and width == 1:
        t = t.unsqueeze(-1)
    if t.dim() != 2:
        raise ValueError(f"{name} must be 2-D with shape (N, D), got shape {tuple(t.shape)}")
    if width is not None and t.shape[1] != width:
        raise ValueError(f"{name} has {t.shape[1]} columns but the model was built for input_dim={width}")
    if t.shape[0] == 0:
        raise ValueError(f"{name} is empty: pass at least one row")
    if not bool(torch.isfinite(t).all()):
        bad = int((~torch.isfinite(t)).any(-1).sum())
        raise ValueError(f"{name} contains NaN or inf in {bad} row(s); drop or impute them before calling")
    return t


def as_targets(y: Any, n: int, dtype: torch.dtype) -> Tensor:
    if isinstance(y, Tensor):
        t = y.detach()
    else:
        try:
            t = torch.from_numpy(np.asarray(y, dtype=np.float64))
        except (TypeError, ValueError) as err:
            raise ValueError(f"y must be numeric, got {type(y).__name__}") from err
    if t.dtype == torch.bool or t.is_complex():
        raise ValueError(f"y must hold real numbers, got dtype {t.dtype}")
    t = t.to(dtype)
    if t.dim() == 2 and t.shape[1] == 1:
        t = t[:, 0]
    if t.dim() != 1:
        raise ValueError(f"y must be 1-D (N,) or (N, 1), got shape {tuple(t.shape)}")
    if t.shape[0] != n:
        raise ValueError(f"x has {n} rows but y has {t.shape[0]}; they must match")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"y contains {int((~torch.isfinite(t)).sum())} NaN or inf value(s)")
    return t


def gaussian_likelihood(noise: float = 0.1, dtype: torch.dtype = DEFAULT_DTYPE) -> gpytorch.likelihoods.GaussianLikelihood:
    """gpytorch Gaussian likelihood with a floor on the noise (in scaled target units)."""
    lik = gpytorch.likelihoods.GaussianLikelihood(noise_constraint=gpytorch.constraints.GreaterThan(1e-6))
    lik.noise = noise
    return lik.to(dtype)


def hyperparameter_optimizer(kernel: nn.Module, likelihood: nn.Module, lr: float = 1e-2,
                             lr_attention: float = 1e-3) -> torch.optim.Adam:
    """Adam over kernel and noise parameters; an Attentive Kernel's network gets its own rate (paper 000 §V-A)."""
    attention = [p for n, p in kernel.named_parameters() if ".attention." in f".{n}"]
    others = [p for p in kernel.parameters() if all(p is not a for a in attention)]
    groups = [{"params": others + list(likelihood.parameters()), "lr": lr}]
    if attention:
        groups.append({"params": attention, "lr": lr_attention})
    return torch.optim.Adam(groups)


class GrowingBuffer:
    """All data seen so far (for methods whose M-step samples from it), with amortised O(1) appends."""

    def __init__(self, dim: int, dtype: torch.dtype):
        self.X = torch.zeros(0, dim, dtype=dtype)
        self.y = torch.zeros(0, dtype=dtype)
        self.n = 0

    def append(self, x: Tensor, y: Tensor) -> None:
        need = self.n + x.shape[0]
        if need > self.X.shape[0]:
            cap = max(need, 2 * self.X.shape[0], 256)
            X = torch.zeros(cap, self.X.shape[1], dtype=self.X.dtype)
            Y = torch.zeros(cap, dtype=self.y.dtype)
            X[: self.n], Y[: self.n] = self.X[: self.n], self.y[: self.n]
            self.X, self.y = X, Y
        self.X[self.n : need], self.y[self.n : need] = x, y
        self.n = need

    @property
    def data(self) -> tuple[Tensor, Tensor]:
        return self.X[: self.n], self.y[: self.n]

    def state(self) -> dict:
        X, y = self.data
        return {"X": X.clone(), "y": y.clone()}

    def load(self, state: dict) -> None:
        self.X, self.y = state["X"].clone(), state["y"].clone()
        self.n = self.X.shape[0]


class OnlineGP(nn.Module, metaclass=ABCMeta):
    """Base class of every online GP: validation, scaling, transactions, checkpoints.

    Subclasses implement ``_update(xs, ys, timer) -> dict`` and ``_predict(xs, full_cov) -> (mean, var_f, cov)``
    in scaled units, and list their variable-size tensors in ``_dynamic``. ``self.noise`` is the scaled noise
    variance. Extra state beyond those tensors goes through ``_extra_state``/``_load_extra_state``.
    """

    _dynamic: tuple[str, ...] = ()

    def __init__(self, input_dim: int, x_bounds: Any = None, dtype: torch.dtype = DEFAULT_DTYPE, seed: int = 0,
                 noise: float = 0.1, y_stats: tuple[float, float] | None = None):
        super().__init__()
        if not isinstance(input_dim, int) or input_dim < 1:
            raise ValueError(f"input_dim must be a positive integer, got {input_dim!r}")
        self.input_dim = input_dim
        self.dtype = dtype
        self.scaler = Scaler(input_dim, None if x_bounds is None else torch.as_tensor(x_bounds, dtype=dtype),
                             y_stats=y_stats, dtype=dtype)
        self.likelihood = gaussian_likelihood(noise, dtype)
        self.generator = torch.Generator().manual_seed(int(seed))
        self.num_data = 0
        self.num_updates = 0
        self.jitter = JitterLog()

    # ----------------------------------------------------------------- the protocol
    def update(self, x: Any, y: Any) -> UpdateReport:
        """Absorb a batch ``(x, y)`` in user units; returns an :class:`UpdateReport`."""
        x = as_tensor_2d(x, "x", self.dtype, self.input_dim)
        y = as_targets(y, x.shape[0], self.dtype)
        snapshot = copy.deepcopy(self.state_dict())
        timer = PhaseTimer()
        self.jitter = JitterLog()
        try:
            with timer("scaling"):
                self.scaler.fit(x, y)
                xs, ys = self.scaler.x(x), self.scaler.y(y)
            info = self._update(xs, ys, timer) or {}
        except BaseException:
            self.load_state_dict(snapshot)
            raise
        self.num_data += x.shape[0]
        self.num_updates += 1
        return UpdateReport(num_data=self.num_data, num_inducing=self.num_inducing, timings=timer.timings,
                            objective=info.pop("objective", None), jitter=self.jitter.max_jitter, extra=info)

    @torch.no_grad()
    def predict(self, x: Any, full_cov: bool = False) -> Prediction:
        """Predictive mean and variances at ``x`` (user units)."""
        if self.num_updates == 0:
            raise RuntimeError("the model has seen no data yet: call update(x, y) before predict")
        x = as_tensor_2d(x, "x", self.dtype, self.input_dim)
        mean, var_f, cov = self._predict(self.scaler.x(x), full_cov)
        var_f = var_f.clamp_min(0.0)
        noise = self.noise.detach()
        return Prediction(
            mean=self.scaler.y_inverse_mean(mean),
            var_f=self.scaler.y_inverse_var(var_f),
            var_y=self.scaler.y_inverse_var(var_f + noise),
            cov_f=None if cov is None else self.scaler.y_inverse_var(cov),
        )

    # ----------------------------------------------------------------- to implement
    @abstractmethod
    def _update(self, xs: Tensor, ys: Tensor, timer: PhaseTimer) -> dict | None:
        """Absorb a validated batch in scaled units; return extra report fields (``objective`` among them)."""

    @abstractmethod
    def _predict(self, xs: Tensor, full_cov: bool) -> tuple[Tensor, Tensor, Tensor | None]:
        """Mean, variance of f and (if ``full_cov``) covariance of f at scaled inputs."""

    @property
    def num_inducing(self) -> int | None:
        Z = getattr(self, "Z", None)
        return None if Z is None else int(Z.shape[0])

    @property
    def inducing_inputs(self) -> Tensor | None:
        """Current inducing inputs in user units (None for models without a single inducing set)."""
        Z = getattr(self, "Z", None)
        return None if Z is None else self.scaler.x_inverse(Z)

    @torch.no_grad()
    def lengthscale_map(self, x: Any) -> Tensor:
        """Length-scale (user input units, mean over dimensions) at ``x``: the AK's attention map, or the constant
        length-scale of a stationary kernel. Raises ValueError for models without a single kernel."""
        kernel = getattr(self, "kernel", None)
        if kernel is None:
            raise ValueError(f"{type(self).__name__} has no single kernel to map")
        x = as_tensor_2d(x, "x", self.dtype, self.input_dim)
        return lengthscale_map(kernel, self.scaler.x(x)) * self.scaler.x_half_range.mean()

    @property
    def noise(self) -> Tensor:
        return self.likelihood.noise.reshape(())

    # ----------------------------------------------------------------- checkpoints
    def _extra_state(self) -> dict:
        """State beyond ``_dynamic`` tensors; ``self.optimizer`` and a ``self.data`` buffer are saved already."""
        return {}

    def _load_extra_state(self, state: dict) -> None:
        pass

    def get_extra_state(self) -> dict:
        dyn = {}
        for k in self._dynamic:
            v = getattr(self, k, None)
            dyn[k] = v.detach().clone() if isinstance(v, Tensor) else copy.deepcopy(v)
        optimizer, data = getattr(self, "optimizer", None), getattr(self, "data", None)
        return {"dynamic": dyn, "generator": self.generator.get_state(), "num_data": self.num_data,
                "num_updates": self.num_updates, "extra": copy.deepcopy(self._extra_state()),
                # a copy: torch's state_dict() hands out the live Adam moments, which a model loading this state
                # would otherwise share (and update in place) with this one
                "optimizer": copy.deepcopy(optimizer.state_dict()) if isinstance(optimizer, torch.optim.Optimizer)
                else None,
                "data": data.state() if isinstance(data, GrowingBuffer) else None}

    def set_extra_state(self, state: dict) -> None:
        for k, v in state["dynamic"].items():
            setattr(self, k, v.clone() if isinstance(v, Tensor) else copy.deepcopy(v))
        self.generator.set_state(state["generator"])
        self.num_data, self.num_updates = state["num_data"], state["num_updates"]
        self._load_extra_state(copy.deepcopy(state["extra"]))
        if state.get("optimizer") is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        if state.get("data") is not None:
            self.data = GrowingBuffer(self.input_dim, self.dtype)
            self.data.load(state["data"])

    def save(self, path: str) -> None:
        """Write an exact checkpoint (``torch.save`` of ``state_dict``)."""
        torch.save(self.state_dict(), path)

    def load(self, path: str) -> "OnlineGP":
        self.load_state_dict(torch.load(path, weights_only=False))
        return self
