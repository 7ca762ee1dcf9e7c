"""Where a mission's time goes: an optional :class:`PhaseTimer` that the mission code reports named phases into.

:func:`~onlinegp.experiments.simulator.run.open_mission` reports ``mission_build`` (the field, the model, the
planner), :func:`~onlinegp.experiments.simulator.run.run_mission` ``run`` (the whole call), ``epochs`` (its decision
epochs: planning and driving, updates, evaluation; each epoch's row splits them), ``checkpoints`` (checkpoints and
metrics.csv), ``figures`` and ``outputs`` (the final model, the survey, the map, metrics.json), and the
single-vehicle planners ``candidates`` (their predictions at the candidate waypoints). A timer counts while it is
active: as a context manager (``with timer: ...``, which also times a mission started through the command line) or
given to ``run_mission`` (``phases=``). With none active a report costs one context-variable look-up and times nothing.

    timer = PhaseTimer()
    with timer:
        run_mission(config, out, quiet=True)
    timer.seconds  # {'run': ..., 'epochs': ..., 'candidates': ..., ...}
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar, Token

_ACTIVE: ContextVar[PhaseTimer | None] = ContextVar("onlinegp_phase_timer", default=None)


class PhaseTimer:
    """Seconds per named phase (:attr:`seconds`, summed over every report of a phase), counted while active."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._tokens: list[Token] = []

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Add the block's wall-clock seconds to phase ``name``."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0

    def __enter__(self) -> PhaseTimer:
        self._tokens.append(_ACTIVE.set(self))
        return self

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.reset(self._tokens.pop())


def phase(name: str) -> contextlib.AbstractContextManager:
    """Time the block into the active :class:`PhaseTimer` as phase ``name``; nothing when none is active."""
    timer = _ACTIVE.get()
    return contextlib.nullcontext() if timer is None else timer.phase(name)


def activated(timer: PhaseTimer | None) -> contextlib.AbstractContextManager:
    """``timer`` active for the block (None: leave whichever is active, if any)."""
    return contextlib.nullcontext() if timer is None else timer
