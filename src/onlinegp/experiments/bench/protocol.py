"""What every ``onlinegp bench NAME`` provides: one :class:`Bench`, registered by the CLI one way.

A bench module (``poam``, ``vips``, ``wiski``, ``wgpr``, ``fleet``, ``defaults``) holds a ``BENCHES`` dict, name to
:class:`Bench`, and :data:`~onlinegp.experiments.bench.CATALOGUE` lists every bench by name. A bench's own options are
one frozen dataclass (its defaults and docstring), each of them declared once: a field made by
:func:`~onlinegp.experiments.flags.option` is also an option of the bench's command, its help, flag and parsing in
the field's metadata; a sweep bench turns them into
:class:`~onlinegp.experiments.bench.runner.RunSpec` items (``specs``), runs each with its ``job`` and summarises the
finished and kept runs into the files of ``--out`` (``summarise``: tables, figures). :meth:`Bench.start` is the Python
API: it runs the sweep between them through :func:`~onlinegp.experiments.bench.runner.run_sweep` (title: the bench's
name, so its runs are kept under ``results/NAME/``). The CLI (:func:`onlinegp.experiments.cli.bench.bench_command`)
gives every bench the same common options (``--out``, default ``runs/NAME``; ``--quiet``; ``--force``; for a sweep
``--results/--no-results`` and ``--resume/--fresh``; where the bench takes them ``--workers`` and
``--backend/--address``), turns them into :class:`~onlinegp.experiments.bench.runner.RunnerOptions`, builds the
bench's options from its own and calls :meth:`Bench.start`; :attr:`Bench.show` says what the terminal gets of the
result and the exit code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .runner import JobFn, RunnerOptions, RunSpec, SweepResult, run_sweep

Echo = Callable[..., Any]


def quiet_show(value: Any, quiet: bool, echo: Echo) -> int:
    """:attr:`Bench.show` of a bench whose summary logs itself: nothing more to show, exit 0."""
    return 0


@dataclass(frozen=True)
class Bench:
    """One ``onlinegp bench NAME``, a sweep (resumable, its runs kept in the results tree); ``options`` is the frozen
    dataclass of its own options.

    ``specs(options)`` gives the runs and ``job`` runs one; ``summary``: the files of a run kept in the results tree,
    ``threads``: a run's (None: the runner's default), ``runs``: the sweep's root under ``out``;
    ``summarise(out, sweep, options, quiet, log)`` writes the tables and figures of the finished runs and returns the
    bench's result. ``show(value, quiet, echo)`` prints the result and gives the exit code; ``description`` is its
    command's help.
    """

    name: str
    options: type
    specs: Callable[[Any], list[RunSpec]]
    job: JobFn
    summarise: Callable[[Path, SweepResult, Any, bool, Echo], Any]
    summary: tuple[str, ...] = ()
    threads: int | None = None
    runs: str = ""
    show: Callable[[Any, bool, Echo], int] = quiet_show
    description: str = ""

    @property
    def out(self) -> str:
        """The default ``--out``."""
        return default_out(self.name)

    def start(
        self, options: Any = None, out: str | Path | None = None, runner: RunnerOptions | None = None, log: Echo = print
    ) -> Any:
        """Run the bench with its ``options`` (default: their defaults) into ``out`` (default :attr:`out`) under
        ``runner``; returns what ``summarise`` returns."""
        options = self.options() if options is None else options
        if not isinstance(options, self.options):
            raise TypeError(f"bench {self.name} takes {self.options.__name__}, got {type(options).__name__}")
        out, runner = Path(self.out if out is None else out), runner or RunnerOptions()
        if runner.threads is None and self.threads is not None:
            runner = replace(runner, threads=self.threads)
        sweep = run_sweep(self.specs(options), self.job, out / self.runs, runner, self.name, self.summary)
        return self.summarise(out, sweep, options, runner.quiet, log)


def default_out(name: str) -> str:
    """A bench's default output directory: ``runs/NAME``."""
    return f"runs/{name}"
