"""How models fit their hyper-parameters: the :class:`Training` spec every model takes, the optimiser every model
builds and the loops every model runs."""

from __future__ import annotations

import dataclasses
import math
import numbers
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from . import health
from .kernels import MAX_AK_INPUTS
from .linalg import CholeskyError

#: iterations of a fit to convergence (``fit='lbfgs'``) at most
LBFGS_ITERATIONS = 100
#: the steps over which :func:`gradient_steps` averages the objective's change for a ``tolerance``
SETTLE_WINDOW = 10
#: Adam-stepped methods take this many times their default steps per batch above ``MAX_AK_INPUTS`` inputs
WIDE_STEP_FACTOR = 5


def steps_for_width(steps: int, input_dim: int) -> int:
    """A default number of Adam steps per batch at this input width: ``steps`` up to 3 inputs (the mapping settings
    of Chen et al. 2024 and Bui et al. 2017), ``WIDE_STEP_FACTOR`` times more above, where every input has its own
    length-scale to learn. On pumadyn32nm (32 inputs, 2 relevant; ``onlinegp bench defaults``' protocol) 10 steps of
    rate 1e-2 per batch leave SSGP++ at 1.58x the exact GP's RMSE after 20 batches and POAM at 1.55x; 50 steps bring
    them to 1.11x. Used by SSGP++, POAM and OVC++ (O-SVGP keeps its per-point rule: see its ``num_steps``)."""
    return steps * WIDE_STEP_FACTOR if input_dim > MAX_AK_INPUTS else steps


def hyperparameter_optimizer(
    kernel: nn.Module, likelihood: nn.Module, lr: float = 1e-2, lr_attention: float = 1e-3
) -> torch.optim.Adam:
    """Adam over kernel and noise parameters; an Attentive Kernel's network gets its own rate (Chen et al. 2024,
    §V-A)."""
    attention = [p for n, p in kernel.named_parameters() if ".attention." in f".{n}"]
    others = [p for p in kernel.parameters() if all(p is not a for a in attention)]
    groups = [{"params": others + list(likelihood.parameters()), "lr": lr}]
    if attention:
        groups.append({"params": attention, "lr": lr_attention})
    return torch.optim.Adam(groups)


def gradient_steps(
    optimizers: Sequence[torch.optim.Optimizer],
    objective: Callable[[], Tensor],
    num_steps: int,
    scale: float = 1.0,
    stepped: Sequence[torch.optim.Optimizer] | None = None,
    schedules: Sequence[torch.optim.lr_scheduler.LRScheduler] = (),
    tolerance: float = 0.0,
) -> float | None:
    """``num_steps`` steps maximising ``objective()``: clear the gradients of every optimiser, back-propagate
    ``-objective() / scale``, step the optimisers in ``stepped`` (default: all), then the learning-rate
    ``schedules``. With ``tolerance`` > 0 the steps stop early once ``objective() / scale`` has changed by less than
    ``tolerance`` per step on average over the last :data:`SETTLE_WINDOW` steps. Returns the last objective value
    (None when ``num_steps`` is 0)."""
    values: list[float] = []
    for _ in range(num_steps):
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        current = objective()
        (-current / scale).backward()
        for opt in optimizers if stepped is None else stepped:
            opt.step()
        for schedule in schedules:
            schedule.step()
        values.append(float(current.detach()))
        if tolerance > 0 and settled(values, scale, tolerance):
            break
    return values[-1] if values else None


def settled(values: Sequence[float], scale: float, tolerance: float) -> bool:
    """Whether the objective ``values`` (one per step so far) have changed by less than ``tolerance`` per step, per
    unit of ``scale``, on average over the last :data:`SETTLE_WINDOW` steps."""
    if len(values) <= SETTLE_WINDOW:
        return False
    return abs(values[-1] - values[-1 - SETTLE_WINDOW]) / (scale * SETTLE_WINDOW) < tolerance


def lbfgs_fit(
    params: Sequence[Tensor],
    objective: Callable[[], Tensor],
    kernel: nn.Module,
    max_iter: int = LBFGS_ITERATIONS,
    scale: float = 1.0,
) -> float:
    """Maximise ``objective()`` over ``params`` by full-batch L-BFGS (strong-Wolfe line search, history 20) to
    convergence or ``max_iter`` iterations; returns the final objective. A trial point with a length-scale too short to
    evaluate (:func:`~onlinegp.health.lengthscales_usable`) or a failed factorisation counts as +inf loss, so the line
    search backs off. The fit of the exact-GP references and of models refitted to convergence after every update."""
    opt = torch.optim.LBFGS(
        list(params),
        lr=1.0,
        max_iter=max_iter,
        history_size=20,
        tolerance_grad=1e-6,
        tolerance_change=1e-10,
        line_search_fn="strong_wolfe",
    )
    dtype = next(iter(params)).dtype

    def closure() -> Tensor:
        opt.zero_grad(set_to_none=False)
        if not health.lengthscales_usable(kernel):
            return torch.tensor(float("inf"), dtype=dtype)
        try:
            loss = -objective() / scale
        except CholeskyError:
            return torch.tensor(float("inf"), dtype=dtype)
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        return float(objective())


# ---------------------------------------------------------------------------------------------- the training spec
#: the optimisers a :class:`Training` may name
OPTIMIZERS = ("adam", "lbfgs")


def _check_count(spec: Any, owner: str, name: str, least: int) -> None:
    """``spec.name`` must be None or an integer >= ``least`` (stored as a Python int)."""
    value = getattr(spec, name)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
        raise ValueError(f"{owner}.{name} must be an integer >= {least} (None: the model's default), got {value!r}")
    object.__setattr__(spec, name, int(value))


def _check_rate(spec: Any, owner: str, name: str, what: str = "learning rate") -> None:
    """``spec.name`` must be None or a finite ``what`` >= 0."""
    value = getattr(spec, name)
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < math.inf
    ):
        raise ValueError(f"{owner}.{name} must be a finite {what} >= 0 (None: the model's default), got {value!r}")


def _fields_of(cls: type, owner: str, values: Mapping[str, Any]) -> dict[str, Any]:
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ValueError(f"unknown {owner} field {unknown[0]!r}; the fields are {', '.join(names)}")
    return dict(values)


@dataclass(frozen=True, repr=False)
class Pretraining:
    """Adam steps on the first batch before it is absorbed, at rates cosine-annealed to zero, with a fresh Adam (the
    pre-training of Stanton et al. 2021, Table C.1). A field left None takes the model's default.

    Args:
        steps: how many (0: no pre-training).
        lr: the hyper-parameters' rate.
        lr_network: the rate of a learnt input network (the Attentive Kernel's, WISKI's projection); None in a
            resolved spec: ``Training.lr_network`` scaled by ``lr / Training.lr``.
    """

    steps: int | None = None
    lr: float | None = None
    lr_network: float | None = None

    def __post_init__(self) -> None:
        _check_count(self, "training.pretrain", "steps", 0)
        _check_rate(self, "training.pretrain", "lr")
        _check_rate(self, "training.pretrain", "lr_network")

    def __repr__(self) -> str:
        return f"Pretraining({_set_repr(self)})"


@dataclass(frozen=True, repr=False)
class Training:
    """How a model fits its hyper-parameters, the same names meaning the same thing in every model: one spec in place
    of per-model ``lr*``/``num_steps``/``pretrain_*`` keywords. A field left None takes the model's default
    (each model's ``TRAINING`` and docstring); ``model.training`` is the spec it resolved and runs with, and
    ``model.options()['training']`` reports it. A field the model does not use is refused with a ValueError.

    Args:
        optimizer: 'adam' (a few steps per update) or 'lbfgs' (fitted to convergence, at most ``steps`` iterations).
        steps: Adam steps, or L-BFGS iterations at most, per update (0 keeps θ fixed); None where a model's default
            is a rule (of the input width, or of the batch's size).
        lr: Adam's rate for the hyper-parameters θ: the kernel's and the noise's.
        lr_network: the rate of a learnt input network: the Attentive Kernel's attention network, WISKI's projection
            (None: at ``lr``).
        lr_variational: the rate of variational parameters moved by gradient: q(u), and Z where it is moved (None:
            at ``lr``).
        batch_size: the mini-batch an objective is estimated on at each step.
        tolerance: an update's Adam steps stop early once the objective per data point has changed by less than
            this per step, on average over the last :data:`SETTLE_WINDOW` steps (0: every step is taken); an OSGPR's
            L-BFGS fit likewise, per evaluation of the best objective seen.
        pretrain: :class:`Pretraining` on the first batch (a dict of its fields is taken too).

    A dict of the fields is taken wherever a spec is (``make_model('poam', training={'steps': 5})``, ``--option
    training="{'steps': 5}"``); an unknown field, a negative rate or step count, or an optimiser not in
    :data:`OPTIMIZERS` is a ValueError naming the field.
    """

    optimizer: str | None = None
    steps: int | None = None
    lr: float | None = None
    lr_network: float | None = None
    lr_variational: float | None = None
    batch_size: int | None = None
    tolerance: float | None = None
    pretrain: Pretraining | None = None

    def __post_init__(self) -> None:
        if self.optimizer is not None and self.optimizer not in OPTIMIZERS:
            raise ValueError(f"training.optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        _check_count(self, "training", "steps", 0)
        _check_count(self, "training", "batch_size", 1)
        for name in ("lr", "lr_network", "lr_variational"):
            _check_rate(self, "training", name)
        _check_rate(self, "training", "tolerance", "tolerance")
        if isinstance(self.pretrain, Mapping):
            object.__setattr__(
                self, "pretrain", Pretraining(**_fields_of(Pretraining, "training.pretrain", self.pretrain))
            )
        elif self.pretrain is not None and not isinstance(self.pretrain, Pretraining):
            raise ValueError(f"training.pretrain must be a Pretraining or a dict of its fields, got {self.pretrain!r}")

    def __repr__(self) -> str:
        return f"Training({_set_repr(self)})"

    @classmethod
    def of(cls, value: "Training | Mapping[str, Any] | None") -> "Training":
        """``value`` as a spec: a Training itself, a dict of its fields (as ``as_dict`` writes them), None: no field
        set."""
        if value is None:
            return cls()
        if isinstance(value, Training):
            return value
        if isinstance(value, Mapping):
            return cls(**_fields_of(cls, "training", value))
        raise ValueError(f"training must be a Training or a dict of its fields, got {value!r}")

    def updated(self, other: "Training") -> "Training":
        """This spec with the fields ``other`` sets (``pretrain`` field by field)."""
        changes = {f: getattr(other, f) for f in other.set_fields()}
        if self.pretrain is not None and other.pretrain is not None:
            mine = {f.name: getattr(self.pretrain, f.name) for f in dataclasses.fields(Pretraining)}
            theirs = {f.name: getattr(other.pretrain, f.name) for f in dataclasses.fields(Pretraining)}
            changes["pretrain"] = Pretraining(**{k: mine[k] if theirs[k] is None else theirs[k] for k in mine})
        return dataclasses.replace(self, **changes)

    def set_fields(self) -> set[str]:
        """The names of the fields that are set (not None)."""
        return {f.name for f in dataclasses.fields(self) if getattr(self, f.name) is not None}

    def as_dict(self) -> dict[str, Any]:
        """The fields that are set, ``pretrain`` as a dict of its own: ``Training.of(spec.as_dict()) == spec``."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}
        if self.pretrain is not None:
            out["pretrain"] = {k: v for k, v in dataclasses.asdict(self.pretrain).items() if v is not None}
        return out

    def rate(self, group: str) -> float | None:
        """The learning rate of the ``'network'`` or ``'variational'`` parameters: their own field, else ``lr``."""
        own = {"network": self.lr_network, "variational": self.lr_variational}[group]
        return self.lr if own is None else own


def _set_repr(spec: Any) -> str:
    return ", ".join(
        f"{f.name}={getattr(spec, f.name)!r}" for f in dataclasses.fields(spec) if getattr(spec, f.name) is not None
    )


def resolve_training(
    given: Training | Mapping[str, Any] | None,
    defaults: Training,
    model: str,
    uses: Sequence[str],
    optimizers: Sequence[str] = ("adam",),
) -> Training:
    """A model's spec: ``given`` (a :class:`Training`, a dict of its fields, or None) over its ``defaults``;
    ValueError naming the field where ``given`` sets one the model does not use, or an optimiser it does not offer."""
    given = Training.of(given)
    unused = sorted(given.set_fields() - set(uses))
    if unused:
        raise ValueError(f"{model} does not use training.{unused[0]} (its training fields: {', '.join(uses)})")
    resolved = defaults.updated(given)
    if resolved.optimizer not in optimizers:
        raise ValueError(
            f"{model} trains with {' or '.join(repr(o) for o in optimizers)}, got training.optimizer="
            f"{resolved.optimizer!r}"
        )
    return resolved


class Trained:
    """A model fitted by a :class:`Training` spec (``self.training``, resolved in its constructor); ``num_steps`` is
    its ``training.steps``, settable (0 freezes θ: what :mod:`onlinegp.botorch` does to condition a copy)."""

    training: Training

    @property
    def num_steps(self) -> int | None:
        """``training.steps``: the steps each update takes now (None: the model's rule for the batch)."""
        return self.training.steps

    @num_steps.setter
    def num_steps(self, value: int | None) -> None:
        self.training = dataclasses.replace(self.training, steps=value)


#: the keywords the models took one by one before the training spec and the :class:`Training` field each
#: sets ('pretrain.' for a :class:`Pretraining` field). A class may rename some (O-SVGP: ``FLAT_TRAINING``).
FLAT_TRAINING = {
    "optimizer": "optimizer",
    "fit": "optimizer",
    "num_steps": "steps",
    "fit_steps": "steps",
    "batch_size": "batch_size",
    "lr": "lr",
    "lr_attention": "lr_network",
    "lr_projection": "lr_network",
    "pretrain_steps": "pretrain.steps",
    "pretrain_lr": "pretrain.lr",
    "pretrain_lr_projection": "pretrain.lr_network",
}
#: the flat keywords that only earlier versions spelled so, each with the field of :class:`Training` that replaces it
#: (another name; nothing current uses theirs): given by a user (a model's options, ``--option``) each warns
#: (FutureWarning) with the spelling that replaces it, until :data:`LEGACY_REMOVED_IN`. ``optimizer``, ``batch_size``
#: and ``lr`` are the fields' own names and ``num_steps`` is every model's ``num_steps`` (and the commands'
#: ``--num-steps``): kept.
LEGACY_TRAINING = {
    **{k: v for k, v in FLAT_TRAINING.items() if k not in ("optimizer", "num_steps", "batch_size", "lr")},
    "lr_hyper": "lr",  # O-SVGP's theta rate (its FLAT_TRAINING, where its flat lr is lr_variational)
}
#: the version that no longer reads :data:`LEGACY_TRAINING` from a user (the next minor one; kept records still read)
LEGACY_REMOVED_IN = "0.8.0"


def _spec_part(field: str, value: Any) -> dict[str, Any]:
    """The fields of a training spec (a dict) that a flat keyword's *field* (``'steps'``, ``'pretrain.lr'``) sets."""
    if field.startswith("pretrain."):
        return {"pretrain": {field.removeprefix("pretrain."): value}}
    return {field: value}


def legacy_message(key: str, value: Any, flat: Mapping[str, str] = LEGACY_TRAINING) -> str:
    """What the deprecated flat keyword ``key=value`` (:data:`LEGACY_TRAINING`) is to be given as instead (*flat*:
    the model's own flat names)."""
    part = repr(_spec_part(flat.get(key) or LEGACY_TRAINING[key], value))
    return (
        f"{key}={value!r} is deprecated and will be removed in onlinegp {LEGACY_REMOVED_IN}: pass training={part} "
        f'(on the command line: --option "training={part}")'
    )


def warn_legacy(options: Mapping[str, Any], flat: Mapping[str, str] = LEGACY_TRAINING, stacklevel: int = 2) -> None:
    """A FutureWarning for each deprecated flat keyword (:data:`LEGACY_TRAINING`) among a user's *options* that the
    model takes (*flat*: its flat names; default: any model's), naming its replacement (:func:`legacy_message`);
    *stacklevel* as :func:`warnings.warn`'s in this function (2: its caller)."""
    for key, value in options.items():
        if key in LEGACY_TRAINING and key in flat:
            warnings.warn(legacy_message(key, value, flat), FutureWarning, stacklevel=stacklevel)


def training_options(
    options: Mapping[str, Any], flat: Mapping[str, str] = FLAT_TRAINING, warn: bool = True, stacklevel: int = 2
) -> dict[str, Any]:
    """Model options with the flat keywords of :data:`FLAT_TRAINING` (``num_steps=5``, ``lr=0.01``, as earlier
    configs, checkpoints' option lists and ``--option`` give them) folded into one ``training`` spec: the one place old
    option names are read. Options apply in their order, a later one winning, as on a command line: a ``training``
    spec (or dict) sets the fields it sets, a flat keyword its one field (None: left to the model). ``fit='lbfgs'``
    (the exact GP's and WISKI's) fitted to convergence whatever ``num_steps`` said, so ``num_steps`` is dropped with
    it. Options without any of these keys come back unchanged.

    A deprecated keyword (:data:`LEGACY_TRAINING`) warns (:func:`warn_legacy`) unless *warn* is False: a recorded
    config (:func:`~onlinegp.models.registry.recorded_options`) is history, read as it was written."""
    if not any(key in flat for key in options):
        return dict(options)
    if warn:
        warn_legacy(options, flat, stacklevel + 1)
    spec, rest = Training(), {}
    for key, value in options.items():
        if key == "training":
            spec = spec.updated(Training.of(value))
        elif key not in flat:
            rest[key] = value
        elif not (key == "num_steps" and options.get("fit") == "lbfgs"):
            spec = spec.updated(Training.of(_spec_part(flat[key], value)))
    return {**rest, "training": spec}


def options_for(
    model_class: type | None, options: Mapping[str, Any], warn: bool = True, stacklevel: int = 2
) -> dict[str, Any]:
    """The options to build ``model_class`` with: :func:`training_options` with the class's own flat names
    (``FLAT_TRAINING``) when a :class:`Training` spec fits it, else the options unchanged; a deprecated flat keyword
    warns unless *warn* is False."""
    if getattr(model_class, "TRAINING", None) is None:
        return dict(options)
    return training_options(options, getattr(model_class, "FLAT_TRAINING", FLAT_TRAINING), warn, stacklevel + 1)
