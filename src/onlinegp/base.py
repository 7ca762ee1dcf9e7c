"""The one interface every method implements (:class:`OnlineGP`) and the records it returns.

A model receives raw user units; :class:`~onlinegp.scaling.Scaler` maps them to the scaled space where all
GP math happens. ``update`` validates first, then runs the method's ``_update`` inside a transaction: if anything
fails the model is restored to exactly its previous state. ``state_dict``/``load_state_dict`` are exact
checkpoints: variable-size tensors (inducing inputs, stored terms, data buffers), optimiser moments and the
model's random generator travel in the module's extra state.

The input width D is fixed by the constructor's ``input_dim`` or, when that is omitted, by the first batch:
whatever depends on it (kernel, scaler, buffers, optimisers) is created by the method's ``_build(input_dim)``,
at construction when D is given, otherwise at the first ``update`` (or when a checkpoint is loaded).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import pickle
import reprlib
import time
import types
from abc import ABCMeta, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import gpytorch
import torch
from torch import Tensor, nn

from . import health
from .buffer import GrowingBuffer
from .io import atomic_write
from .kernels import kernel_name, lengthscale_map, make_kernel
from .linalg import JitterLog
from .objectives import DataStatistics
from .posterior import InducingPosterior, Predictor, VariationalQ
from .projected import ProjectedTerms
from .scaling import Scaler
from .training import options_for
from .validation import as_noise_variances, as_targets, as_tensor_2d, floating_dtype

DEFAULT_DTYPE = torch.float64


def copy_state(value: Any) -> Any:
    """``copy.deepcopy`` of nested dicts (a state dict's OrderedDict with its ``_metadata``), lists, tuples and
    dataclass instances (a posterior's or a summary's; copied as ``copy.copy`` does, through their ``__getstate__``,
    then each attribute), with their plain tensors cloned directly: the same copy, at a fraction of deepcopy's
    per-tensor cost. It is taken before every update, for the rollback; an ensemble's holds every member's state."""
    if type(value) is Tensor and not value.requires_grad:
        return value.clone()
    if type(value) in (dict, OrderedDict):
        out = type(value)((k, copy_state(v)) for k, v in value.items())
        if hasattr(value, "_metadata"):  # torch's state_dict() versions its modules here
            out._metadata = copy.deepcopy(value._metadata)
        return out
    if type(value) in (list, tuple):
        return type(value)(copy_state(v) for v in value)
    if type(value) in (int, float, bool, str, type(None)):
        return value  # immutable: what deepcopy returns too
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and hasattr(value, "__dict__"):
        out = copy.copy(value)
        vars(out).update(copy_state(vars(out)))
        return out
    return copy.deepcopy(value)


def to_device(value: Any, device: torch.device) -> Any:
    """``value`` with every tensor in it (through dicts, lists, tuples and dataclasses) on ``device``; a leaf that
    requires grad stays a leaf. The same object where nothing moves."""
    if isinstance(value, Tensor):
        if value.device == device:
            return value
        moved = value.detach().to(device)
        return moved.requires_grad_() if value.requires_grad and value.is_leaf else moved
    if type(value) is dict:
        return {k: to_device(v, device) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(to_device(v, device) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        moved = copy.copy(value)
        for f in dataclasses.fields(value):
            object.__setattr__(moved, f.name, to_device(getattr(value, f.name), device))
        return moved
    return value


def class_name(cls: type) -> str:
    """``module.QualName`` of a model class, as a checkpoint records it."""
    return f"{cls.__module__}.{cls.__qualname__}"


#: the library's own types a model's state holds besides tensors, numbers and containers: all :func:`read_state` lets
#: a checkpoint build
STATE_TYPES = (DataStatistics, InducingPosterior, Predictor, ProjectedTerms, VariationalQ)


def read_state(source: Any, map_location: Any = None) -> dict:
    """A model's state from a checkpoint (a path or a binary file) written by :meth:`OnlineGP.save`, read with torch's
    weights-only unpickler: a checkpoint can build tensors and :data:`STATE_TYPES` and nothing else, so a file from
    elsewhere (a service, a colleague) cannot run code. A ValueError when it is not such a checkpoint."""
    try:
        with torch.serialization.safe_globals(list(STATE_TYPES)):
            state = torch.load(source, weights_only=True, map_location=map_location)
    except (OSError, EOFError, RuntimeError, ValueError, UnicodeDecodeError, pickle.UnpicklingError) as error:
        raise ValueError(f"cannot read the checkpoint {source}: {type(error).__name__}: {error}") from error
    if not isinstance(state, dict) or not isinstance(state.get("_extra_state"), dict):
        raise ValueError(f"{source} is not a checkpoint written by OnlineGP.save (no model state in it)")
    return state


def registered_names(cls: type) -> list[str]:
    """The names :func:`~onlinegp.models.make_model` builds ``cls`` under (its presets included), sorted: what
    :func:`~onlinegp.models.register` recorded on the class itself (a subclass inherits none)."""
    return list(vars(cls).get("_registered_names", ()))


@dataclass
class Prediction:
    """Predictive distribution: latent ``f`` and noisy ``y`` marginals (and ``cov_f``, the covariance of f, if asked).

    The names of gpytorch's and scikit-learn's predictive distributions are those of ``y``, the predictive of a new
    observation (gpytorch's ``likelihood(model(x))``, scikit-learn's ``predict(x, return_std=True)`` with a noise
    kernel): ``variance`` is ``var_y``, ``stddev`` its square root, ``covariance_matrix`` is ``cov_f`` plus the
    noise on its diagonal, and ``mean, variance = pred`` unpacks. ``var_f``/``cov_f`` are the latent ones."""

    mean: Tensor
    var_f: Tensor
    var_y: Tensor
    cov_f: Tensor | None = None

    @property
    def std_y(self) -> Tensor:
        return self.var_y.sqrt()

    @property
    def variance(self) -> Tensor:
        return self.var_y

    @property
    def stddev(self) -> Tensor:
        return self.std_y

    @property
    def covariance_matrix(self) -> Tensor:
        """Covariance of y at the predicted points: ``cov_f`` plus the noise variance on the diagonal."""
        if self.cov_f is None:
            raise ValueError("this prediction has no covariance: predict with full_cov=True to get one")
        return self.cov_f + torch.diag_embed(self.var_y - self.var_f)

    def __iter__(self) -> Iterator[Tensor]:
        """``mean, variance = pred`` (the variance of y)."""
        return iter((self.mean, self.var_y))


@dataclass
class UpdateReport:
    """What one ``update`` did: sizes, seconds per phase, objective values, jitter added, and the warnings of
    :mod:`onlinegp.health` (inputs beyond the fitted range, an overconfident prediction of the batch before it was
    absorbed, ill-conditioned matrices, hyper-parameters running away), also logged; ``extra`` holds the checked numbers."""

    num_data: int
    num_inducing: int | None
    timings: dict[str, float] = field(default_factory=dict)
    objective: float | None = None
    jitter: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def total_time(self) -> float:
        return float(sum(self.timings.values()))


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


def preset(model: str, options: dict[str, Any], **fixed: Any) -> dict[str, Any]:
    """``options`` with the settings a class fixes (``fixed``) added; ValueError naming the class when ``options``
    asks for another value of one of them (the same value is accepted, so a model's recorded ``options()`` rebuild it)."""
    clash = sorted(k for k, v in fixed.items() if k in options and options[k] != v)
    if clash:
        wanted = ", ".join(f"{k}={fixed[k]!r}" for k in clash)
        raise ValueError(f"{model} fixes {wanted}; use the class it varies (see its docstring) for other values")
    return {**options, **fixed}


def jsonable_options(options: dict[str, Any]) -> dict[str, Any]:
    """``model.options()`` for a JSON record: dtypes by name, tensors as lists, a training spec as the dict of its set
    fields (which ``make_model`` takes back), other objects by ``repr``."""

    def plain(value: Any) -> Any:
        if callable(getattr(value, "as_dict", None)):  # a Training spec
            return plain(value.as_dict())
        if isinstance(value, torch.dtype):
            return str(value).removeprefix("torch.")
        if isinstance(value, Tensor):
            return value.tolist()
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        return repr(value)

    return {k: plain(v) for k, v in sorted(options.items())}


def model_record(model: "OnlineGP") -> dict[str, Any]:
    """What a run's model actually is, asked of the instance (for config.json and every other record): its class,
    current inducing-set size, kernel class, hyper-parameter steps per update (its training's ``steps``) and
    :meth:`OnlineGP.options` as JSON (``make_model(name, **options)`` rebuilds it)."""
    options = jsonable_options(model.options())
    kernel = getattr(model, "kernel", None)
    size = model.num_inducing if model.num_inducing is not None else options.get("num_inducing")
    return {
        "class": type(model).__name__,
        "num_inducing": None if size is None else int(size),
        "kernel": None if kernel is None else type(getattr(kernel, "base_kernel", kernel)).__name__,
        "num_steps": options.get("training", {}).get("steps"),
        "options": options,
    }


def gaussian_likelihood(
    noise: float = 0.1, dtype: torch.dtype = DEFAULT_DTYPE
) -> gpytorch.likelihoods.GaussianLikelihood:
    """gpytorch Gaussian likelihood with a floor on the noise (in scaled target units)."""
    lik = gpytorch.likelihoods.GaussianLikelihood(noise_constraint=gpytorch.constraints.GreaterThan(1e-6))
    lik.noise = noise
    return lik.to(dtype)


class _BuildWhenWidthKnown(ABCMeta):
    """Runs ``_build`` once the whole constructor chain has finished, when ``input_dim`` was given."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        model = super().__call__(*args, **kwargs)
        if model._requested_dim is not None:
            model._build_for(model._requested_dim)
        return model


class _class_or_instance:
    """A method bound to the instance when called on one, else to the class (``POAM.load(path)`` and
    ``model.load(path)``)."""

    def __init__(self, method: Callable) -> None:
        self.method = method
        functools.update_wrapper(self, method)

    def __get__(self, instance: Any, owner: type) -> Callable:
        return types.MethodType(self.method, owner if instance is None else instance)


#: ``x_bounds`` that fits the input scaling on the first batch and freezes it
FIRST_BATCH = "first-batch"

_short = reprlib.Repr()
_short.maxlist = _short.maxtuple = 4
_short.maxstring = _short.maxother = 60


class OnlineGP(nn.Module, metaclass=_BuildWhenWidthKnown):
    """Base class of every online GP: validation, scaling, transactions, checkpoints.

    Subclasses keep their options in ``__init__`` (keyword-only after ``input_dim``), create what depends on the
    input width in ``_build(input_dim)`` (calling ``super()._build`` first), implement ``_update(xs, ys, timer) ->
    dict`` and ``_predict(xs, full_cov) -> (mean, var_f, cov_f)`` in scaled units, and list their variable-size
    tensors in ``_dynamic``. ``self.noise`` is the scaled noise variance. Extra state beyond those tensors goes
    through ``_extra_state``/``_load_extra_state``.

    Args:
        input_dim: D, the number of inputs; None (default) takes it from the first batch.
        x_bounds: (2, D) corners of the input domain for scaling (they also fix D); None (default): fitted on the
            first batch and widened as later batches reach beyond it, where the model can re-express its state
            (:meth:`_follow`; the others refuse a batch far outside); ``'first-batch'``: fitted on the first batch
            and frozen (what the POAM paper's code does).
        y_stats: optional (mean, std) of the targets; else fitted on the first batch.
        noise: initial noise variance in scaled target units (default 0.1).
        seed: seed of the model's own random generator and of its initial weights: the same ``seed`` on the same
            data gives the same results in any process.
        dtype: float64 by default.
    """

    _dynamic: tuple[str, ...] = ()

    def __init__(
        self,
        input_dim: int | None = None,
        *,
        x_bounds: Any = None,
        dtype: torch.dtype = DEFAULT_DTYPE,
        seed: int = 0,
        noise: float = 0.1,
        y_stats: tuple[float, float] | None = None,
    ):
        super().__init__()
        self._widens = x_bounds is None
        if isinstance(x_bounds, str) and x_bounds != FIRST_BATCH:
            raise ValueError(f"x_bounds is the (2, D) corners of the input domain, None or {FIRST_BATCH!r}")
        given = x_bounds is not None and not isinstance(x_bounds, str)
        bounds = torch.as_tensor(x_bounds, dtype=dtype).reshape(2, -1) if given else None
        if input_dim is not None and (isinstance(input_dim, bool) or not isinstance(input_dim, int) or input_dim < 1):
            raise ValueError(
                f"input_dim must be a positive integer or None (taken from the first batch), got {input_dim!r}"
            )
        if bounds is not None and input_dim is not None and bounds.shape[1] != input_dim:
            raise ValueError(f"x_bounds has {bounds.shape[1]} columns but input_dim={input_dim}")
        self._requested_dim = input_dim if bounds is None else int(bounds.shape[1])
        self.input_dim: int | None = None
        self.dtype = dtype
        self._x_bounds, self._y_stats = bounds, y_stats
        self.likelihood = gaussian_likelihood(noise, dtype)
        self.initial_noise = float(noise)
        self.seed = int(seed)
        self.generator = torch.Generator().manual_seed(self.seed)
        self.num_data = 0
        self.num_updates = 0
        self.jitter = JitterLog()

    # ----------------------------------------------------------------- options
    def options(self) -> dict[str, Any]:
        """The options this model runs with, as keyword arguments of its class: ``type(m)(**m.options())`` builds
        the same model. Read from the instance, so they are what it resolved (the kernel ``'auto'`` stands for, the
        steps chosen for the input width once it is known), not a signature's defaults; each class adds the options
        it owns. ``input_dim`` is not among them (it is the data's, recorded as ``model.input_dim``)."""
        frozen = None if self._widens else FIRST_BATCH
        return {
            "x_bounds": frozen if self._x_bounds is None else self._x_bounds.tolist(),
            "y_stats": None if self._y_stats is None else [float(v) for v in self._y_stats],
            "noise": self.initial_noise,
            "seed": self.seed,
            "dtype": self.dtype,
        }

    # ----------------------------------------------------------------- the input width
    def _build(self, input_dim: int) -> None:
        """Create what depends on the input width (subclasses extend this, calling ``super()._build`` first)."""
        self.scaler = Scaler(input_dim, self._x_bounds, y_stats=self._y_stats, dtype=self.dtype)

    def _build_for(self, input_dim: int) -> None:
        """``_build`` with torch's global generator seeded by ``seed`` (and restored after): what it draws, such as
        an attention network's initial weights, is the same in every process for the same ``seed``. It builds on
        the CPU, so that a model on another device starts from the same draws, and then moves there."""
        self.input_dim = int(input_dim)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self._build(self.input_dim)
        if self.device.type != "cpu":
            self._rebuild_on(self.device)

    def _rebuild_on(self, device: torch.device) -> None:
        """Move a built model to ``device``: build its structure again there (what ``_build`` creates, with the
        tensors it makes on ``device``) and load its own state into it, so every tensor it holds moves, the
        optimiser moments and stored terms too."""
        state = self.state_dict()
        nn.Module.to(self, device)
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), device:
            self._build(self.input_dim)
        self.load_state_dict(state)

    @property
    def device(self) -> torch.device:
        """Where the model keeps its tensors and computes: the CPU unless moved by ``.to(device)``."""
        return self.likelihood.noise_covar.raw_noise.device

    def _placed(self) -> AbstractContextManager:
        """Tensors created without a device inside it are created on the model's device."""
        device = self.device
        return nullcontext() if device.type == "cpu" else device

    def _structure(self) -> tuple[dict, dict]:
        """The model's attributes and registered parameters, buffers and modules (shallow copies)."""
        return dict(self.__dict__), {k: dict(self.__dict__[k]) for k in ("_parameters", "_buffers", "_modules")}

    def _restore_structure(self, structure: tuple[dict, dict]) -> None:
        attributes, registries = structure
        self.__dict__.clear()
        self.__dict__.update(attributes)
        for k, v in registries.items():
            self.__dict__[k].clear()
            self.__dict__[k].update(v)

    # ----------------------------------------------------------------- the protocol
    @property
    def takes_noise(self) -> bool:
        """Whether ``update`` takes per-point noise variances (``update(x, y, noise=...)``), and then needs them.
        False here: the model's noise variance is its own, learnt; a model with a fixed-noise likelihood (WISKI
        with ``fixed_noise=True``) says True."""
        return False

    def _noise_argument(self, noise: Any, rows: int) -> Tensor | None:
        """``update``'s ``noise`` validated (user units, one positive variance per row), or ValueError naming the
        model when it takes none, or needs it and got none."""
        name = type(self).__name__
        if not self.takes_noise:
            if noise is not None:
                raise ValueError(
                    f"{name} takes no per-point noise (its noise variance is learnt): call update(x, y) without "
                    "noise=, or use a model with a fixed-noise likelihood, e.g. WISKI(fixed_noise=True)"
                )
            return None
        if noise is None:
            raise ValueError(
                f"this {name} needs per-point noise: pass update(x, y, noise=...) with one variance per row"
            )
        return as_noise_variances(noise, rows, self.dtype)

    def update(self, x: Any, y: Any, noise: Any = None) -> UpdateReport:
        """Absorb a batch ``(x, y)`` in user units; returns an :class:`UpdateReport`.

        ``noise``: the observation noise variance of each row (user units, positive), for models whose
        ``takes_noise`` is True (which then need it); every other model refuses it with a ValueError.

        A batch that fails anywhere, or is refused, leaves the model exactly as it was (after a failed first batch
        the model has no input width again)."""
        x = as_tensor_2d(x, "x", self.dtype, self.input_dim).to(self.device)
        y = as_targets(y, x.shape[0], self.dtype).to(self.device)
        noise = self._noise_argument(noise, x.shape[0])
        noise = None if noise is None else noise.to(self.device)
        # state_dict() copies the extra state already; parameters and buffers are live views, so clone those
        snapshot = {k: v.clone() if isinstance(v, Tensor) else v for k, v in self.state_dict().items()}
        unbuilt = self._structure() if self.input_dim is None else None
        size_before = self.num_inducing if self.num_updates else None
        timer = PhaseTimer()
        try:
            if unbuilt is not None:
                self._build_for(x.shape[1])
            with self._placed():
                info, warnings, checks = self._update_placed(x, y, noise, timer)
        except BaseException:
            if unbuilt is not None:
                self._restore_structure(unbuilt)
            self.load_state_dict(snapshot)
            raise
        before = (size_before, self.num_data)
        self.num_data += x.shape[0]
        self.num_updates += 1
        selector = getattr(self, "selector", None)  # a fixed M (num_inducing) or a cap (max_inducing) bounds its size
        bound = getattr(selector, "num_inducing", None) or getattr(selector, "max_inducing", None)
        warnings += health.size(before, (self.num_inducing, self.num_data), bound)
        for warning in warnings:
            health.log.warning("%s update %d: %s", type(self).__name__, self.num_updates, warning)
        return UpdateReport(
            num_data=self.num_data,
            num_inducing=self.num_inducing,
            timings=timer.timings,
            objective=info.pop("objective", None),
            jitter=self.jitter.max_jitter,
            extra=checks | info,
            warnings=warnings,
        )

    def _update_placed(
        self, x: Tensor, y: Tensor, noise: Tensor | None, timer: PhaseTimer
    ) -> tuple[dict, list[str], dict]:
        """``update``'s work on a built model, on its device: scaling, the health checks and ``_update``."""
        self.jitter = JitterLog()
        with timer("scaling"):
            degenerate = self.scaler.fit(x, y)
            if self._widens and self.num_updates:
                self._widen_scaling(x)
            xs, ys = self.scaler.x(x), self.scaler.y(y)
        with timer("health"), torch.no_grad():
            warnings, checks = health.input_range(xs)
            warnings = health.scaling(degenerate, x.shape[0]) + warnings
            if self.num_updates and xs.shape[0] >= health.MIN_BATCH:
                before = self.posterior_scaled(xs)
                found, calibration = health.calibration(before.mean, before.var_y, ys)
                diverging, error = health.fit(before.mean, ys, absorbed=False)
                warnings, checks = warnings + found + diverging, checks | calibration | error
        if noise is None:
            info = self._update(xs, ys, timer) or {}
        else:  # in scaled units, as the batch
            info = self._update(xs, ys, timer, noise=noise / self.scaler.y_std**2) or {}
        with timer("health"), torch.no_grad():
            warnings += health.objective(info.get("objective"), xs.shape[0]) + health.conditioning(self.jitter)
            warnings += health.runaway(getattr(self, "kernel", None))
            if xs.shape[0] >= health.MIN_BATCH:
                found, error = health.fit(self.posterior_scaled(xs).mean, ys, absorbed=True)
                warnings, checks = warnings + found, checks | error
        return info, warnings, checks

    def _widen_scaling(self, x: Tensor) -> None:
        """A batch whose bulk lies beyond the range the scaling was fitted on, with ``x_bounds`` None (a vehicle's
        stream starts small: that is the normal case; :func:`onlinegp.health.beyond`): the scaling widens to cover
        it where the model can re-express its state in the wider units (:meth:`_follow`); any other model refuses
        a batch whose bulk lies beyond ``health.INPUT_RANGE`` half-ranges, saying what to do."""
        xs = self.scaler.x(x)
        if not health.beyond(xs, health.WIDEN_AT):
            return
        bounds, scale, shift = self.scaler.covering(x)
        if self._follow(scale, shift):
            self.scaler.set_x_bounds(bounds)
        elif health.beyond(xs, health.INPUT_RANGE):
            reach = xs.abs().amax(0)
            raise ValueError(health.beyond_range(type(self).__name__, int(reach.argmax()), float(reach.max())))

    def _follow(self, scale: Tensor, shift: Tensor) -> bool:
        """Re-express the model's state for scaled inputs ``xs' = scale * xs + shift`` (its scaling widened to
        cover a batch beyond it), or return False having changed nothing: the default, for models whose stored
        terms are tied to the units they were formed in."""
        return False

    def posterior_scaled(self, xs: Tensor, full_cov: bool = False) -> Prediction:
        """Predictive distribution at scaled inputs, in scaled units; differentiable in ``xs`` (no validation).

        For code that works in the model's scaled space (ensembles of models, acquisition functions)."""
        with self._placed():
            mean, var_f, cov = self._predict(xs, full_cov)
        var_f = var_f.clamp_min(0.0)
        return Prediction(mean=mean, var_f=var_f, var_y=var_f + self.noise.detach(), cov_f=cov)

    def posterior(self, x: Any, full_cov: bool = False) -> Prediction:
        """Predictive distribution at ``x`` in user units, differentiable in a tensor ``x`` (e.g. for BoTorch).

        Computed in the model's ``dtype`` on its device; returned in the floating dtype of ``x`` when it is a
        floating tensor or array (float32 in, float32 out), else in the model's, and on the device of ``x`` when it
        is a tensor, else on the model's."""
        if self.num_updates == 0:
            raise RuntimeError("the model has seen no data yet: call update(x, y) before predict")
        out = floating_dtype(x) or self.dtype
        out = torch.empty(0, dtype=out, device=x.device if isinstance(x, Tensor) else self.device)
        x = as_tensor_2d(x, "x", self.dtype, self.input_dim, keep_graph=True).to(self.device)
        with self._placed():  # a model that overrides posterior_scaled (the ensembles) computes there too
            scaled = self.posterior_scaled(self.scaler.x(x), full_cov)
        return Prediction(
            mean=self.scaler.y_inverse_mean(scaled.mean).to(out),
            var_f=self.scaler.y_inverse_var(scaled.var_f).to(out),
            var_y=self.scaler.y_inverse_var(scaled.var_y).to(out),
            cov_f=None if scaled.cov_f is None else self.scaler.y_inverse_var(scaled.cov_f).to(out),
        )

    @torch.no_grad()
    def predict(self, x: Any, full_cov: bool = False) -> Prediction:
        """Predictive mean and variances at ``x`` (user units): ``mean, variance = model.predict(x)``."""
        return self.posterior(x, full_cov)

    def forward(self, x: Any, full_cov: bool = False) -> Prediction:
        """``model(x)``: :meth:`posterior` at ``x``, as a gpytorch model's call (:meth:`predict` without gradients)."""
        return self.posterior(x, full_cov)

    # ----------------------------------------------------------------- to implement
    @abstractmethod
    def _update(self, xs: Tensor, ys: Tensor, timer: PhaseTimer) -> dict | None:
        """Absorb a validated batch in scaled units; return extra report fields (``objective`` among them). A model
        whose ``takes_noise`` is True gets the batch's noise variances too, scaled, as ``noise=``."""

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
        if self.input_dim is None:
            raise RuntimeError("the model has seen no data yet: call update(x, y) before lengthscale_map")
        x = as_tensor_2d(x, "x", self.dtype, self.input_dim).to(self.device)
        with self._placed():
            return lengthscale_map(kernel, self.scaler.x(x)) * self.scaler.x_half_range.mean()

    @property
    def noise(self) -> Tensor:
        return self.likelihood.noise.reshape(())

    @torch.no_grad()
    def hyperparameters(self, x: Any = None) -> dict[str, float]:
        """The learnt noise variance and, where the model has one kernel, its output scale, in user units; with
        inputs ``x`` also the smallest and largest length-scale over them (user input units). For logs: a noise
        variance collapsing or a length-scale running off shows here first."""
        if self.input_dim is None:
            return {}
        y_var = float(self.scaler.y_std) ** 2
        out = {"noise": float(self.noise) * y_var}
        kernel = getattr(self, "kernel", None)
        scale = getattr(kernel, "outputscale", None)
        if scale is not None:
            out["outputscale"] = float(scale) * y_var
        if x is not None:
            try:
                ls = self.lengthscale_map(x)
            except ValueError:
                return out
            out.update(lengthscale_min=float(ls.min()), lengthscale_max=float(ls.max()))
        return out

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
            dyn[k] = v.detach().clone() if isinstance(v, Tensor) else copy_state(v)
        optimizer, data = getattr(self, "optimizer", None), getattr(self, "data", None)
        return {
            "class": class_name(type(self)),
            "model": registered_names(type(self)),
            "input_dim": self.input_dim,
            "dynamic": dyn,
            "generator": self.generator.get_state(),
            "num_data": self.num_data,
            "num_updates": self.num_updates,
            "extra": copy_state(self._extra_state()),
            # a copy: torch's state_dict() hands out the live Adam moments, which a model loading this state
            # would otherwise share (and update in place) with this one
            "optimizer": copy_state(optimizer.state_dict()) if isinstance(optimizer, torch.optim.Optimizer) else None,
            "data": data.state() if isinstance(data, GrowingBuffer) else None,
        }

    def set_extra_state(self, state: dict) -> None:
        # a checkpoint from another device; the random generator's state stays on the CPU, where the generator is
        state = {k: v if k == "generator" else to_device(v, self.device) for k, v in state.items()}
        for k, v in state["dynamic"].items():
            setattr(self, k, v.clone() if isinstance(v, Tensor) else copy.deepcopy(v))
        self.generator.set_state(state["generator"])
        self.num_data, self.num_updates = state["num_data"], state["num_updates"]
        self._load_extra_state(copy.deepcopy(state["extra"]))
        if state.get("optimizer") is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        if state.get("data") is not None:
            self.data = GrowingBuffer(self.input_dim, self.dtype, self.device)
            self.data.load(state["data"])

    def load_state_dict(self, state_dict: dict, strict: bool = True, assign: bool = False) -> Any:
        """Load an exact checkpoint; a model that has not fixed its input width yet adopts the checkpoint's.

        A checkpoint of another class is refused (ValueError naming both) before anything changes, and a load that
        fails leaves the model exactly as it was."""
        extra = state_dict.get("_extra_state", {}) if isinstance(state_dict, dict) else {}
        saved = extra.get("class") if isinstance(extra, dict) else None
        if saved is not None and saved != class_name(type(self)):
            names = ", ".join(extra.get("model") or []) or "no registered name"
            raise ValueError(
                f"the checkpoint is of a {saved} model ({names}), not of this {class_name(type(self))} "
                f"({', '.join(registered_names(type(self))) or 'no registered name'}): load it into a model of its "
                f"own class, e.g. make_model({(extra.get('model') or ['NAME'])[0]!r}).load(path)"
            )
        width = extra.get("input_dim", self.input_dim) if isinstance(extra, dict) else self.input_dim
        snapshot = (
            None
            if self.input_dim is None
            else {k: v.clone() if isinstance(v, Tensor) else v for k, v in self.state_dict().items()}
        )
        unbuilt = self._structure() if self.input_dim is None else None
        try:
            if width != self.input_dim:
                if self.input_dim is not None:
                    raise ValueError(
                        f"the checkpoint is of a model with input_dim={width}, this model has "
                        f"input_dim={self.input_dim}; load it into a model built without input_dim"
                    )
                self._build_for(width)
            return super().load_state_dict(state_dict, strict=strict, assign=assign)
        except BaseException:
            if unbuilt is not None:
                self._restore_structure(unbuilt)
            else:
                super().load_state_dict(snapshot)
            raise

    def save(self, path: str) -> None:
        """Write an exact checkpoint (``torch.save`` of ``state_dict``), atomically (:func:`onlinegp.io.atomic_write`)."""
        atomic_write(path, lambda fh: torch.save(self.state_dict(), fh))

    @_class_or_instance
    def load(target: "OnlineGP | type[OnlineGP]", path: str, **options: Any) -> "OnlineGP":
        """Read a checkpoint written by ``save`` and return the model: ``model.load(path)`` loads into ``model``,
        ``POAM.load(path, **options)`` into a new model of that class. A checkpoint holds the state, not the options:
        give the options it was saved with where they are not the defaults (``POAM.load(path, num_inducing=120)``,
        or ``make_model(name, **options).load(path)``); its input width and scaling come from the file, read by
        :func:`read_state` (weights-only: a checkpoint cannot run code)."""
        if not isinstance(target, type) and options:
            raise ValueError(
                f"options ({', '.join(options)}) are for building a model: call load on the class "
                f"({type(target).__name__}.load(path, **options)) or build the model with them first"
            )
        # a class takes the flat training keywords of earlier versions, as make_model does (num_steps=5, lr=0.01)
        model = target(**options_for(target, options, stacklevel=3)) if isinstance(target, type) else target
        model.load_state_dict(read_state(path, model.device))
        return model

    # ----------------------------------------------------------------- conventions of nn.Module
    def __repr__(self) -> str:
        """The class, the options that differ from those of ``type(self)()`` (choices resolved for the data, such as
        the kernel ``'auto'`` stands for, show too), and the data seen (N) and inducing inputs (M)."""
        defaults = type(self)().options()
        shown = [
            _option_repr(k, v, defaults.get(k)) for k, v in self.options().items() if repr(v) != repr(defaults.get(k))
        ]
        size = f"N={self.num_data}" + ("" if self.num_inducing is None else f", M={self.num_inducing}")
        return f"{type(self).__name__}({', '.join(shown)}) [{size}]"

    def to(self, *args: Any, **kwargs: Any) -> "OnlineGP":
        """Move to a device as ``nn.Module.to`` (every tensor the model holds moves, stored terms and optimiser
        moments too; inputs are moved to the model's device and predictions come back on the inputs'); a change of
        dtype is refused (build the model with ``dtype=``)."""
        device, dtype, _, _ = torch._C._nn._parse_to(*args, **kwargs)
        self._keep_dtype(dtype)
        if device is None:
            return self
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        if device == self.device:
            return self
        if self.input_dim is None:
            return nn.Module.to(self, device)
        self._rebuild_on(device)
        return self

    def cuda(self, device: Any = None) -> "OnlineGP":
        return self.to(torch.device("cuda", device) if isinstance(device, int) else device or "cuda")

    def cpu(self) -> "OnlineGP":
        return self.to("cpu")

    def type(self, dst_type: Any) -> "OnlineGP":
        return self.to(torch.empty(0).type(dst_type).dtype)

    def float(self) -> "OnlineGP":
        return self.to(torch.float32)

    def double(self) -> "OnlineGP":
        return self.to(torch.float64)

    def half(self) -> "OnlineGP":
        return self.to(torch.float16)

    def bfloat16(self) -> "OnlineGP":
        return self.to(torch.bfloat16)

    def _keep_dtype(self, dtype: torch.dtype | None) -> None:
        """The dtype lives in the scaler, buffers, stored terms and optimisers too: only a new model changes it."""
        if dtype is not None and dtype != self.dtype:
            raise ValueError(
                f"{type(self).__name__} computes in {self.dtype} and cannot be converted to {dtype}: build it with "
                f"dtype={dtype} instead (predictions come back in the dtype of the inputs either way)"
            )


def _option_repr(key: str, value: Any, default: Any) -> str:
    """``key=value`` for a model's repr; of a training spec only the fields that differ from the default spec's."""
    if callable(getattr(value, "as_dict", None)) and callable(getattr(default, "as_dict", None)):
        theirs = default.as_dict()
        changed = {k: v for k, v in value.as_dict().items() if theirs.get(k) != v}
        return f"{key}={type(value).__name__}({', '.join(f'{k}={v!r}' for k, v in changed.items())})"
    return f"{key}={_short.repr(value)}"


class KernelGP(OnlineGP):
    """An :class:`OnlineGP` with one kernel, ``self.kernel``, created for the input width by ``_build``.

    Args:
        kernel: a name for :func:`~onlinegp.kernels.make_kernel` ('rbf', 'ak', 'matern32', ...) or a gpytorch Kernel.
        kernel_options: keyword arguments of :func:`~onlinegp.kernels.make_kernel`.
        input_dim: as for :class:`OnlineGP`.
        **options: x_bounds, y_stats, noise, seed, dtype, as for :class:`OnlineGP`.
    """

    def __init__(
        self, input_dim: int | None = None, *, kernel: Any = "rbf", kernel_options: dict | None = None, **options: Any
    ):
        super().__init__(input_dim, **options)
        self._kernel_spec, self._kernel_options = kernel, dict(kernel_options or {})

    def options(self) -> dict[str, Any]:
        spec = self._kernel_spec
        if isinstance(spec, str) and self.input_dim is not None:
            spec = kernel_name(spec, self._kernel_dim(self.input_dim))
        return {**super().options(), "kernel": spec, "kernel_options": dict(self._kernel_options)}

    def _kernel_dim(self, input_dim: int) -> int:
        """Number of inputs the kernel sees (the input width, unless a model maps its inputs first)."""
        return input_dim

    def _build(self, input_dim: int) -> None:
        super()._build(input_dim)
        self.kernel = make_kernel(self._kernel_spec, self._kernel_dim(input_dim), self.dtype, **self._kernel_options)
