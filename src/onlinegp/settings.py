"""Numerical and backend settings, changed for a block or for the rest of the process (as ``gpytorch.settings``)::

    from onlinegp import settings

    with settings.max_jitter(1e-4):      # for this block only, restored on exit (also on an exception)
        model.update(x, y)
    settings.native_kernel.set(False)    # from now on; settings.native_kernel.value() is False
    settings.native_kernel.reset()       # back to the default

A setting is one process-wide value (not per thread); worker processes a sweep starts see the defaults. The
defaults are the module constants named below (and the ``ONLINEGP_NATIVE`` environment variable), read when the
setting has not been changed.
"""

from __future__ import annotations

import importlib
import os
from abc import ABC, abstractmethod
from typing import Any, Generic, TypeVar

from . import portable

T = TypeVar("T")
_DEFAULT: Any = object()  # the value of a setting nobody has changed


class _Setting(ABC, Generic[T]):
    """One global value: ``with setting(value):`` for a block, ``setting.set(value)`` / ``setting.reset()``."""

    _value: Any = _DEFAULT

    def __init__(self, value: T) -> None:
        self._new = self.check(value)
        self._previous: Any = _DEFAULT

    @classmethod
    @abstractmethod
    def default(cls) -> T:
        """The value while the setting is unchanged."""

    @classmethod
    @abstractmethod
    def check(cls, value: Any) -> T:
        """``value`` if valid for this setting; ValueError otherwise."""

    @classmethod
    def value(cls) -> T:
        """The current value: the last one set, else the default."""
        return cls.default() if cls._value is _DEFAULT else cls._value

    @classmethod
    def set(cls, value: T) -> None:
        cls._value = cls.check(value)

    @classmethod
    def reset(cls) -> None:
        cls._value = _DEFAULT

    def __enter__(self) -> _Setting[T]:
        cls = type(self)
        self._previous, cls._value = cls._value, self._new
        return self

    def __exit__(self, *exc_info: object) -> None:
        type(self)._value = self._previous


class _Constant(_Setting[T]):
    """A setting whose default is a module constant, ``constant = "module.NAME"`` (in onlinegp, imported when read)."""

    constant: str

    @classmethod
    def default(cls) -> T:
        module, name = cls.constant.rsplit(".", 1)
        return getattr(importlib.import_module(f"{__package__}.{module}"), name)


class _PositiveConstant(_Constant[float]):
    """A positive number with a module constant as default."""

    @classmethod
    def check(cls, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:  # NaN is not > 0
            raise ValueError(f"settings.{cls.__name__} takes a positive number, got {value!r}")
        return float(value)


class native_kernel(_Setting[bool]):
    """Whether the Attentive Kernel may use its compiled routine (:mod:`onlinegp.kernels.native`); False selects
    the PyTorch path. Default: on, unless the environment variable ``ONLINEGP_NATIVE`` is ``0``; always on in the
    portable mode (:mod:`onlinegp.portable`), whose digits must not depend on the environment."""

    @classmethod
    def default(cls) -> bool:
        return portable.active() or os.environ.get("ONLINEGP_NATIVE", "1") != "0"

    @classmethod
    def check(cls, value: Any) -> bool:
        if not isinstance(value, bool):
            raise ValueError(f"settings.native_kernel takes True or False, got {value!r}")
        return value


class native_thread_work(_Constant[int]):
    """Below this many exponentials (n1 · n2 · M) a native Attentive-Kernel call runs on one thread; above, rows
    are split over ``torch.get_num_threads()`` threads. Default: ``onlinegp.kernels.native.THREAD_WORK``."""

    constant = "kernels.native.THREAD_WORK"

    @classmethod
    def check(cls, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"settings.native_thread_work takes a positive integer, got {value!r}")
        return value


class quadratic_max_cond(_PositiveConstant):
    """Above this estimated cond(K_uu) marginal predictions use triangular solves instead of the cached quadratic
    form (decided once per predictor, on its first prediction). Default: ``onlinegp.posterior.QUADRATIC_MAX_COND``."""

    constant = "posterior.QUADRATIC_MAX_COND"


class max_jitter(_PositiveConstant):
    """The largest relative jitter :func:`onlinegp.linalg.cholesky` adds before it raises
    :class:`~onlinegp.linalg.CholeskyError`. Default: ``onlinegp.linalg.MAX_JITTER``."""

    constant = "linalg.MAX_JITTER"
