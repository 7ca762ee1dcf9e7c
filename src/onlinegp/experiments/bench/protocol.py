"""What every ``onlinegp bench NAME`` provides: one :class:`Bench`, registered by the CLI one way.

A bench module (``poam``, ``vips``, ``wiski``, ``wgpr``, ``fleet``, ``defaults``) holds a ``BENCHES`` dict, name to
:class:`Bench`. A bench's entry point is its Python API (``vips.run_table1``, ``poam.table1``, ...): it turns the
bench's own options into :class:`~onlinegp.experiments.bench.runner.RunSpec` items, runs them with its job through
:func:`~onlinegp.experiments.bench.runner.run_sweep` (title: the bench's name, so its runs are kept under
``results/NAME/``) and summarises the finished and kept runs into the files of ``--out`` (tables, figures). The CLI
(:func:`onlinegp.experiments.cli.bench_command`) gives every bench the same common options (``--out``, default
``runs/NAME``; ``--quiet``; ``--force``; for a sweep ``--results/--no-results`` and ``--resume/--fresh``; where the
bench takes them ``--workers`` and ``--backend/--address``), turns them into
:class:`~onlinegp.experiments.bench.runner.RunnerOptions` and calls :meth:`Bench.start`; :attr:`Bench.show` says
what the terminal gets of the result and the exit code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .runner import RunnerOptions

Echo = Callable[..., Any]


def quiet_show(value: Any, quiet: bool, echo: Echo) -> int:
    """:attr:`Bench.show` of a bench whose entry point logs its own summary: nothing more to show, exit 0."""
    return 0


@dataclass(frozen=True)
class Bench:
    """One ``onlinegp bench NAME``.

    ``run`` is the entry point, called with the bench's own options by name and ``out``; how it takes the sweep's
    :class:`~onlinegp.experiments.bench.runner.RunnerOptions` is ``takes``:

    * ``"runner"``: as ``options=RunnerOptions(...)`` (the POAM experiments and WGPR, which run on Ray too);
    * ``"flat"``: as ``workers``, ``quiet``, ``results``, ``fresh`` and ``log`` (the entry point sets its threads);
    * ``"loop"``: ``quiet`` and ``log`` only: one in-process loop, not a sweep (nothing kept, nothing resumed).

    ``show(value, quiet, echo)`` prints what the entry point returned and gives the exit code.
    """

    name: str
    run: Callable[..., Any]
    takes: str = "flat"
    show: Callable[[Any, bool, Echo], int] = quiet_show

    def __post_init__(self) -> None:
        if self.takes not in ("runner", "flat", "loop"):
            raise ValueError(f"a bench takes its runner options as runner, flat or loop, not {self.takes!r}")

    @property
    def out(self) -> str:
        """The default ``--out``."""
        return default_out(self.name)

    @property
    def sweep(self) -> bool:
        """Whether the bench runs a sweep (resumable, its runs kept in the results tree)."""
        return self.takes != "loop"

    def start(self, out: str | Path, runner: RunnerOptions, log: Echo, options: dict[str, Any]) -> Any:
        """Run the bench into ``out`` with its own ``options``; returns what its entry point returns."""
        if self.takes == "runner":
            return self.run(out=out, options=runner, **options)
        how: dict[str, Any] = {"quiet": runner.quiet, "log": log}
        if self.takes == "flat":
            how |= {"results": runner.results, "fresh": runner.fresh}
            if "workers" in self._parameters():
                how["workers"] = runner.workers
        return self.run(out=out, **how, **options)

    def _parameters(self) -> set[str]:
        import inspect

        return set(inspect.signature(self.run).parameters)


def default_out(name: str) -> str:
    """A bench's default output directory: ``runs/NAME``."""
    return f"runs/{name}"
