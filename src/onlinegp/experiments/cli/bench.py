"""``onlinegp bench``: every bench's command, ``bench verify`` and ``bench report``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from ..bench import CATALOGUE
from . import Options, _claim, _signature_with, bench_app, declared_options, invoke


def bench_command(name: str, quiet: str = "no progress bar or table", workers: bool = False, ray: bool = False) -> None:
    """Register ``onlinegp bench NAME``, the one way every bench is registered, from its
    :class:`~onlinegp.experiments.bench.protocol.Bench` ``CATALOGUE[NAME]`` alone (run by :func:`_run_bench`): its help
    is the bench's ``description``, its own options the fields of its options dataclass made by
    :func:`~onlinegp.experiments.flags.option` (:func:`~onlinegp.experiments.cli.declared_options`), then the options
    every bench shares (:func:`_common_options`: ``--quiet`` with help *quiet*, ``--workers`` where *workers*,
    ``--backend`` and ``--address`` where *ray*, the results tree's options)."""
    bench = CATALOGUE[name]

    def command(**arguments: Any) -> None:
        _run_bench(name, arguments)

    command.__doc__ = bench.description
    command.__signature__ = _signature_with(
        command, {**declared_options(bench.options), **_common_options(name, quiet, workers, ray)}
    )
    bench_app.command(name)(command)


def _common_options(name: str, quiet: str, workers: bool, ray: bool) -> Options:
    """The options every bench takes (``--out``, ``--quiet``, ``--force``, the results tree's ``--results``,
    ``--no-results``, ``--resume/--fresh``) and those a bench takes where it runs in parallel (``--workers``) or on
    Ray (``--backend``, ``--address``): :func:`_run_bench` takes them off before calling the bench."""
    from ..bench.protocol import default_out

    return {
        "out": (
            str,
            typer.Option(default_out(name), "--out", help="output directory (finished runs are skipped on rerun)"),
        ),
        **({"workers": (int, WORKERS(ray))} if workers else {}),
        **(_ray_options() if ray else {}),
        "quiet": (bool, typer.Option(False, "--quiet", "-q", help=quiet)),
        **_results_options(),
        "force": (
            bool,
            typer.Option(False, "--force", help="replace an --out that holds another run (its own runs are resumed)"),
        ),
    }


def WORKERS(ray: bool = False) -> typer.models.OptionInfo:  # noqa: N802 - a fresh Option per command, as typer needs
    where = "local processes, or Ray slots with --backend ray; " if ray else ""
    return typer.Option(1, "--workers", help=f"parallel runs ({where}timings are only comparable with 1)")


def _ray_options() -> Options:
    """``--backend`` and ``--address`` of a bench that runs on Ray too."""
    return {
        "backend": (str, typer.Option("local", "--backend", help="local (worker processes) or ray")),
        "address": (
            str,
            typer.Option(
                None,
                "--address",
                help="Ray cluster HOST:PORT or auto (--backend ray); without it a local Ray instance is started",
            ),
        ),
    }


def _results_options() -> Options:
    """The committed-results options of a sweep (onlinegp.experiments.bench.runner)."""
    from ..bench.runner import RESULTS_ENV

    return {
        "results": (
            str,
            typer.Option(
                None,
                "--results",
                envvar=RESULTS_ENV,
                help="results tree: every finished run's summary is kept in DIR/BENCH/CONFIG_HASH and a run found "
                "there is restored, not run (default: results/ of the onlinegp git checkout, else of the current "
                "directory)",
            ),
        ),
        "no_results": (bool, typer.Option(False, "--no-results", help="neither use nor keep a results tree")),
        "kept_only": (
            str,
            typer.Option(
                None,
                "--kept-only",
                hidden=True,  # bench report's: its --out is a scratch directory
                help="run nothing: restore every run from the runs of this version kept in --results",
            ),
        ),
        "resume": (
            bool,
            typer.Option(
                True,
                "--resume/--fresh",
                help="skip runs finished in --out or kept in --results (default), or run every run again, replacing "
                "its directory and kept summary",
            ),
        ),
    }


#: the options of :func:`_common_options` that become the sweep's RunnerOptions
RUNNER_OPTIONS = ("workers", "backend", "address", "quiet", "results", "no_results", "resume", "kept_only")


def _run_bench(name: str, arguments: dict[str, Any]) -> None:
    """Run bench *name* of the catalogue with the command's *arguments*: take ``--out`` (a usage error when it
    holds another run, unless ``--force``; a rerun of the same bench continues there) and the runner's options off,
    build the bench's options from the rest and start it, show its result; a ValueError is a usage error, a failed
    run exit 1 where the bench says so."""
    from ..bench.runner import RunnerOptions, resolve_results

    out, force = arguments.pop("out"), arguments.pop("force")
    runner = {k: arguments.pop(k) for k in RUNNER_OPTIONS if k in arguments}
    _claim(out, f"bench {name}", force=force, reuse=True)
    bench = CATALOGUE[name]
    try:
        fresh = not runner.pop("resume", True)
        results = resolve_results(runner.pop("results", None), not runner.pop("no_results", True))
        options = RunnerOptions(**runner, results=results, fresh=fresh)
        value = bench.start(bench.options(**arguments), out, options, typer.echo)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    code = bench.show(value, options.quiet, typer.echo)
    if code:
        raise typer.Exit(code)


#: how a bench's command differs from the default one: its ``--quiet`` help, ``--workers``, Ray's options
COMMANDS: dict[str, dict[str, Any]] = {
    "wgpr": {"quiet": "no progress bar or tables", "workers": True, "ray": True},
    "poam-table1": {"workers": True, "ray": True},
    "poam-ablation": {"workers": True, "ray": True},
    "poam-robustness": {"workers": True, "ray": True},
    "fleet": {"workers": True},
    "wiski-bo": {"workers": True},
    "wiski-uci": {"workers": True},
    "wiski-rank": {"workers": True},
    "wiski-banana": {"quiet": "no progress bar"},
    "vips-table1": {"workers": True},
    "defaults": {"workers": True},
    "vips-magnetic": {"quiet": "no progress bar or summary"},
    "vips-synthetic": {"workers": True},
}
for _name in CATALOGUE:
    bench_command(_name, **COMMANDS[_name])


@bench_app.command("verify")
def bench_verify(
    runs: list[str] = typer.Argument(None, help="kept runs to verify: <bench>/<key>, a bench, or a run id"),
    sample: int = typer.Option(None, "--sample", min=1, help="a random sample of this many kept runs of this version"),
    seed: int = typer.Option(0, "--seed", help="seed of the sample"),
    results: Path = typer.Option(None, "--results", help="the results tree (default: this checkout's results/)"),
) -> None:
    """Run kept results again and report any whose numbers no longer reproduce exactly (wall-clock figures aside).
    A run of the portable mode reproduces exactly under `onlinegp --portable` on any CPU; a default-mode run made on
    another machine kind is 'close' when every result moved less than its repeats' spread. Exits 1 when one differs
    or fails."""
    from ..bench.runner import resolve_results
    from ..bench.verify import verify

    try:
        verdicts = verify(resolve_results(results), runs or (), sample, seed, echo=typer.echo)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    counts = {s: sum(v.status == s for v in verdicts) for s in ("reproduced", "close", "differs", "failed", "skipped")}
    typer.echo(", ".join(f"{n} {s}" for s, n in counts.items() if n))
    if counts["differs"] or counts["failed"]:
        raise typer.Exit(1)


@bench_app.command("report")
def bench_report(
    pages: list[Path] = typer.Argument(None, help="pages to render (default: docs/results/*.md and README.md)"),
    check: bool = typer.Option(False, "--check", help="compare only: exit 1 when a page differs from its rendering"),
    results: Path = typer.Option(None, "--results", help="the results tree (default: this checkout's results/)"),
) -> None:
    """Render the tables of the results pages again from the kept runs alone (each `<!-- report: ... -->` block of a
    page names its command, output file and version). Runs nothing: a block whose runs are not kept fails."""
    from ..bench.report import default_pages, render
    from ..bench.runner import default_results_root, resolve_results

    try:
        root = default_results_root()
        pages = pages or default_pages(root.parent)
        changed = render(pages, resolve_results(results), invoke, check=check, echo=typer.echo)
    except ValueError as err:
        raise typer.BadParameter(str(err)) from err
    verb = "differ from their rendering" if check else "rewritten"
    typer.echo(f"{len(changed)} page(s) {verb}" + (f": {', '.join(p.name for p in changed)}" if changed else ""))
    if check and changed:
        raise typer.Exit(1)
