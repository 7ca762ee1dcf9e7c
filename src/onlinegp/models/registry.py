"""Models by name, so every experiment (mission, stream, bench) can use every method.

``MODELS`` maps a lower-case name to a :class:`ModelEntry` (factory and one-line description); each model module
registers its classes with :func:`register` when it is imported (``onlinegp.models`` imports them all), and
:func:`make_model` builds one by name. A registered variant of a class with preset options (an ablation) is a
``functools.partial`` of that class. Each registered class lists the names it is built under in its own
``_registered_names`` attribute (what :func:`onlinegp.base.registered_names` reads).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ..training import options_for

if TYPE_CHECKING:
    from ..base import OnlineGP

T = TypeVar("T")


class ModelEntry(NamedTuple):
    """A registered model: how to build it and what it is."""

    factory: Callable[..., OnlineGP]
    description: str


MODELS: dict[str, ModelEntry] = {}


def register(name: str, description: str, **preset: Any) -> Callable[[T], T]:
    """Class decorator: register ``cls`` (with ``preset`` options, if any) as ``name``; returns ``cls`` unchanged."""

    def add(cls: T) -> T:
        key = name.lower()
        if key in MODELS:
            raise ValueError(f"a model is already registered as {key!r}")
        MODELS[key] = ModelEntry(functools.partial(cls, **preset) if preset else cls, description)
        cls._registered_names = tuple(sorted((*vars(cls).get("_registered_names", ()), key)))
        return cls

    return add


def model_class(name: str) -> type | None:
    """The class registered as ``name`` (a preset variant's class too); None for an unknown name."""
    entry = MODELS.get(name.lower())
    return None if entry is None else getattr(entry.factory, "func", entry.factory)


def make_model(name: str, input_dim: int | None = None, **options: Any) -> OnlineGP:
    """Build the model registered as ``name`` (case-insensitive); ``input_dim`` None takes it from the first batch.

    A model fitted by a :class:`~onlinegp.training.Training` spec also takes the flat keywords of earlier configs
    (``num_steps=5``, ``lr=0.01``, ``pretrain_steps=0``, ...), folded into its ``training`` by
    :func:`~onlinegp.training.options_for`; a deprecated one (:data:`~onlinegp.training.LEGACY_TRAINING`:
    ``pretrain_steps``) warns, a recorded config's does not (:func:`make_recorded_model`)."""
    key = name.lower()
    if key not in MODELS:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(sorted(MODELS))}")
    return MODELS[key].factory(input_dim, **options_for(model_class(key), options, stacklevel=3))


def recorded_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """A recorded config's options for the model registered as ``name`` (a run's ``config.json``, a kept result, a
    bench's configs, which keep the flat keywords they were written with so that their keys stay), as
    :func:`make_model` builds it with them: :func:`~onlinegp.training.options_for` without its deprecation warnings
    (a record is history, not a user's input)."""
    return options_for(model_class(name), options, warn=False)


def make_recorded_model(name: str, input_dim: int | None = None, **options: Any) -> OnlineGP:
    """:func:`make_model` of a recorded config (an experiment's run, resumed, verified or rebuilt from its
    ``config.json``): its deprecated flat keywords read silently (:func:`recorded_options`), the user having been
    warned where they gave them (``--option``)."""
    return make_model(name, input_dim, **recorded_options(name, options))
