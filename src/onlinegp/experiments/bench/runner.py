"""The sweep runner every ``onlinegp bench`` command shares: many independent runs, one directory each.

A sweep is a list of :class:`RunSpec` (a unique ``run_id`` that is also the run's directory under the sweep root,
and a JSON-serialisable ``config``) and a job function ``fn(config, run_dir) -> JSON-serialisable value`` defined at
module level (it is pickled to the workers). Backends:

* ``local`` (default): ``workers`` processes of a spawn-context :class:`~concurrent.futures.ProcessPoolExecutor`;
  ``workers=1`` runs in this process.
* ``ray``: one Ray task per run, for a cluster of several machines (``address="HOST:PORT"`` or ``"auto"``), or a
  local Ray instance with ``num_cpus=workers`` when no address is given. Tasks run into a scratch directory on
  whichever node executes them and send the run's files back, so the sweep root needs no shared file system; every
  node needs ``onlinegp`` installed (``pip install 'onlinegp[ray]'``).

A run is finished when its directory holds :data:`MARKER`, written atomically after everything else and carrying
the hash of the run's config; finished runs are skipped, so rerunning an interrupted sweep resumes it (a run whose
config changed is run again). A failing run leaves its traceback in ``run_dir/error.txt``, is reported, and does not
stop the others.

Committed results. With ``RunnerOptions.results`` set (the ``onlinegp bench`` commands set it by default), every
finished run's small summary is kept in a tree meant to be committed to git::

    <results>/<title>/<config_hash>/spec.json    run id, config hash and config
                                    <summary>    the files ``run_sweep(..., summary=PATTERNS)`` names (metrics, ...)
                                    DONE.json    the run's marker: hash, job value, seconds, code version

``<title>`` is the bench's name (``poam-table1``, ``vips-table1``, ``wgpr``); checkpoints, models and figures stay
in the sweep root only. A run whose summary is in the tree counts as finished: its summary is copied into the sweep
root (marker last) instead of running it, so a fresh clone with an empty sweep root rebuilds the tables without
recomputing; a run finished in the sweep root but missing from the tree is added to it. The key hashes the config
and the package version (:attr:`RunSpec.config_hash`): a change that alters numbers raises ``onlinegp.__version__``,
and the runs of older versions stay in the tree as history but are never served or resumed as current.
``fresh=True`` (``--fresh``) runs every spec again, replacing its run directory and, when it finishes, its summary.
Only committed code is kept: with uncommitted changes in src/ (:func:`code_version` ends ``+dirty``) runs go to the
sweep root alone. Each kept ``spec.json`` names the job function and summary patterns, so ``onlinegp bench verify``
can rerun any kept run and compare its numbers. Only the sweep's own process writes the tree: a summary is assembled in a hidden
``.tmp-<pid>-*`` directory beside its final place and renamed into place whole, so a run killed at any point (a
worker, the parent, a lost Ray task) leaves either no ``<config_hash>`` directory or a complete one; leftovers of a
killed process are removed by the next sweep. Local worker processes die with the sweep's process (Linux), so none
keeps writing into a run directory that a rerun uses. The CLI's tree is ``--results DIR``, else ``$ONLINEGP_RESULTS``,
else :func:`default_results_root`; ``--no-results`` turns it off.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from ... import portable
from ...io import atomic_write
from ...kernels import native

MARKER = "DONE.json"
ERROR_FILE = "error.txt"
SWEEP_FILE = "sweep.json"
SPEC_FILE = "spec.json"
RESULTS_DIR = "results"
RESULTS_ENV = "ONLINEGP_RESULTS"  # the CLI's default for --results, when set
BACKENDS = ("local", "ray")
_SCRATCH = re.compile(r"\.(?:tmp|old)-(\d+)-")  # a summary being written, or one being replaced, by process <pid>

JobFn = Callable[[dict, Path], Any]


class NotKept(ValueError):
    """A sweep of :attr:`RunnerOptions.kept_only` needs runs that the results tree does not hold."""


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: ``run_id`` (a relative path, unique in the sweep) and its JSON-serialisable config."""

    run_id: str
    config: dict

    @property
    def config_hash(self) -> str:
        """The run's key for this code: :meth:`key` of ``onlinegp.__version__``."""
        return self.key()

    def key(self, version: str | None = None) -> str:
        """The run's key: its config and the package version ``version`` (default ``onlinegp.__version__``, raised
        by any change that alters a committed run's numbers), so a run of older code is never taken for a run of
        this one; in the portable numeric mode also the mode, whose numbers differ from the default's (default keys
        are unchanged)."""
        from ... import __version__

        keyed = {"config": self.config, "onlinegp": version or __version__}
        if portable.active():
            keyed["numerics"] = "portable"
        return hashlib.sha256(_canonical(keyed, self.run_id).encode()).hexdigest()[:16]


@dataclass
class RunResult:
    """What happened to one run: ``status`` is 'done', 'skipped' (finished earlier) or 'failed'."""

    run_id: str
    run_dir: Path
    status: str
    seconds: float = 0.0
    value: Any = None
    error: str | None = None
    restored: bool = False  # skipped because its committed summary was copied into the sweep root


@dataclass
class RunnerOptions:
    """How to execute a sweep (the ``--workers/--backend/--address/--quiet/--results/--fresh`` options of every bench
    command).

    ``threads`` is the number of torch/BLAS threads per run (default: the machine's cores divided by ``workers``
    for local processes, ``cpus_per_run`` for Ray tasks, unchanged in-process); ``cpus_per_run`` is the CPUs Ray
    reserves per task. ``results`` is the root of the committed results tree (None: none); ``fresh`` runs every
    spec again, finished or committed (see the module docstring). ``kept_only`` (a version) runs nothing: every run
    is restored from the runs of that version kept in ``results`` (:class:`NotKept` names those it lacks), under
    this code's keys, so into a scratch sweep root: how ``onlinegp bench report`` renders tables from the results
    tree alone, including the history of older versions.
    """

    workers: int = 1
    backend: str = "local"
    address: str | None = None
    quiet: bool = False
    threads: int | None = None
    cpus_per_run: int = 1
    results: str | Path | None = None
    fresh: bool = False
    kept_only: str | None = None

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"workers must be a positive integer, got {self.workers!r}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be a positive integer, got {self.threads!r}")
        if self.cpus_per_run < 1:
            raise ValueError(f"cpus_per_run must be a positive integer, got {self.cpus_per_run!r}")
        if self.address is not None and self.backend != "ray":
            raise ValueError("--address only applies to --backend ray; drop it or add --backend ray")


@dataclass
class SweepResult:
    """All runs of a sweep, in spec order, with their specs."""

    root: Path
    runs: list[RunResult] = field(default_factory=list)
    results: Path | None = None  # this sweep's directory in the committed results tree
    specs: list[RunSpec] = field(default_factory=list)

    def by_status(self, status: str) -> list[RunResult]:
        return [r for r in self.runs if r.status == status]

    @property
    def failed(self) -> list[RunResult]:
        return self.by_status("failed")

    @property
    def ok(self) -> bool:
        return not self.failed


# ---------------------------------------------------------------------- run directories
def _canonical(config: dict, run_id: str) -> str:
    try:
        return json.dumps(config, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"the config of run {run_id!r} is not JSON-serialisable ({err}); use plain numbers, "
            "strings, lists and dicts"
        ) from err


def is_finished(run_dir: str | Path, spec: RunSpec | None = None, version: str | None = None) -> bool:
    """True when ``run_dir`` holds a completion marker (for ``spec``'s config, when given, run by ``version``:
    default this code's)."""
    path = Path(run_dir) / MARKER
    if not path.is_file():
        return False
    if spec is None:
        return True
    try:
        return json.loads(path.read_text()).get("config_hash") == spec.key(version)
    except (OSError, ValueError):
        return False


def _mark_done(run_dir: Path, spec: RunSpec, outcome: dict) -> None:
    (run_dir / ERROR_FILE).unlink(missing_ok=True)
    atomic_write(
        run_dir / MARKER,
        json.dumps(
            {
                "run_id": spec.run_id,
                "config_hash": spec.config_hash,
                "seconds": outcome["seconds"],
                "value": outcome["value"],
                "code": outcome.get("code"),
                "machine": outcome.get("machine"),
                "numerics": outcome.get("numerics"),
                "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            },
            indent=1,
        ),
    )


def _mark_failed(run_dir: Path, error: str) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / MARKER).unlink(missing_ok=True)
    atomic_write(run_dir / ERROR_FILE, error)


def _check_specs(specs: Sequence[RunSpec]) -> None:
    seen: set[str] = set()
    for spec in specs:
        if not isinstance(spec, RunSpec):
            raise ValueError(f"a sweep takes RunSpec items, got {type(spec).__name__}")
        rid = spec.run_id
        parts = Path(rid).parts
        if not rid or Path(rid).is_absolute() or ".." in parts or rid != Path(rid).as_posix():
            raise ValueError(
                f"run id {rid!r} must be a non-empty relative path without '..' (it names the run's "
                "directory under the sweep root)"
            )
        if rid in seen:
            raise ValueError(f"run id {rid!r} appears twice in the sweep; run ids must be unique")
        seen.add(rid)
        _canonical(spec.config, rid)


# ---------------------------------------------------------------------- the committed results tree
def default_results_root() -> Path:
    """``results/`` of the git checkout onlinegp runs from (an editable install or a source tree), wherever the
    command runs; for an installed package, ``results/`` in the current directory."""
    checkout = Path(__file__).resolve().parents[4]  # src/onlinegp/experiments/bench/runner.py
    if (checkout / ".git").exists() and (checkout / "pyproject.toml").is_file():
        return checkout / RESULTS_DIR
    return Path.cwd() / RESULTS_DIR


def resolve_results(path: str | Path | None, enabled: bool = True) -> Path | None:
    """The results root of the CLI's ``--results DIR`` / ``--no-results``: None when not ``enabled``, else ``path``
    or :func:`default_results_root`."""
    if not enabled:
        return None
    return Path(path) if path is not None else default_results_root()


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _summary_files(run_dir: Path, patterns: Sequence[str]) -> list[str]:
    found = {p.relative_to(run_dir).as_posix() for pattern in patterns for p in run_dir.glob(pattern) if p.is_file()}
    return sorted(found - {MARKER, ERROR_FILE, SPEC_FILE})


def job_name(fn: JobFn) -> str:
    """``module:function`` of a job, recorded with every kept run so that ``onlinegp bench verify`` can rerun it."""
    return f"{fn.__module__}:{fn.__qualname__}"


def save_summary(run_dir: Path, dest: Path, spec: RunSpec, patterns: Sequence[str], job: str) -> None:
    """Copy a finished run's summary (``patterns`` under ``run_dir``, then its marker) to ``dest``, whole or not at all:
    it is assembled in a hidden directory beside ``dest`` and renamed into place (replacing an older summary).
    ``spec.json`` records the run (id, key, config) and how to run it again (``job``, ``summary``)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".tmp-{os.getpid()}-"))
    try:
        record = {"run_id": spec.run_id, "config_hash": spec.config_hash, "config": spec.config}
        (tmp / SPEC_FILE).write_text(json.dumps(record | {"job": job, "summary": list(patterns)}, indent=1))
        for rel in [*_summary_files(run_dir, patterns), MARKER]:
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(run_dir / rel, tmp / rel)
        for path in [*tmp.rglob("*"), tmp]:
            _sync(path)
        tmp.chmod(0o755)  # mkdtemp's directories are private
        try:
            os.rename(tmp, dest)
        except OSError:  # an older summary is there (a fresh run): swap it out
            old = dest.with_name(f".old-{os.getpid()}-{dest.name}")
            os.rename(dest, old)
            os.rename(tmp, dest)
            shutil.rmtree(old)
        _sync(dest.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def restore_summary(src: Path, run_dir: Path) -> None:
    """Copy a committed summary into ``run_dir``, its marker last (a copy cut short leaves the run unfinished)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / ERROR_FILE).unlink(missing_ok=True)
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src).as_posix()
        if path.is_file() and rel not in (MARKER, SPEC_FILE):
            (run_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, run_dir / rel)
    atomic_write(run_dir / MARKER, (src / MARKER).read_bytes())


def _code_of(run_dir: Path) -> str | None:
    """The code version a finished run's marker records."""
    try:
        return json.loads((run_dir / MARKER).read_text()).get("code")
    except (OSError, ValueError):
        return None


def _restore_kept(specs: Sequence[RunSpec], root: Path, store: Path | None, title: str, version: str) -> SweepResult:
    """The sweep of :attr:`RunnerOptions.kept_only`: every spec restored from the kept run of ``version``, found by
    its key or else by run id and the config keys that run records (a key added to configs since that version is one
    its code did not have); :class:`NotKept` names the runs not found. The restored marker takes the spec's key, so
    the bench reads the run back as its own."""
    by_id: dict[str, list[tuple[dict, Path]]] = {}
    for marker in sorted(store.glob(f"*/{MARKER}")) if store is not None else []:
        kept = marker.parent
        if not kept.name.startswith(".") and (_code_of(kept) or "").split(" ")[0] == version:
            spec_record = json.loads((kept / SPEC_FILE).read_text())
            by_id.setdefault(spec_record["run_id"], []).append((spec_record["config"], kept))
    runs, missing = [], []
    for spec in specs:
        exact = store / spec.key(version) if store is not None else None
        found = [exact] if exact is not None and is_finished(exact, spec, version) else []
        found = found or [d for config, d in by_id.get(spec.run_id, []) if _records_part_of(config, spec.config)]
        if len(found) != 1:
            missing.append(f"{spec.run_id}{' (ambiguous)' if found else ''}")
            continue
        run_dir = root / spec.run_id
        restore_summary(found[0], run_dir)
        marker = json.loads((run_dir / MARKER).read_text()) | {"config_hash": spec.config_hash}
        atomic_write(run_dir / MARKER, json.dumps(marker, indent=1))
        runs.append(RunResult(spec.run_id, run_dir, "skipped", marker["seconds"], marker["value"], restored=True))
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise NotKept(
            f"{len(missing)} run(s) of {title!r} are not kept for version {version} under {store}: "
            f"{', '.join(missing[:5])}{more}"
        )
    return SweepResult(root, runs, store, list(specs))


def _records_part_of(recorded: dict, config: dict) -> bool:
    """Every key of a kept run's ``recorded`` config has the same value in ``config`` (nested dicts alike)."""
    return all(
        key in config
        and (
            _records_part_of(value, config[key])
            if isinstance(value, dict) and isinstance(config[key], dict)
            else config[key] == value
        )
        for key, value in recorded.items()
    )


def _alive(pid: int) -> bool:
    if os.name != "posix":  # os.kill would end the process there
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _remove_leftovers(store: Path) -> None:
    """Remove the half-written summaries of processes that were killed while writing them."""
    if store.is_dir():
        for path in store.iterdir():
            m = _SCRATCH.match(path.name)
            if m and path.is_dir() and not _alive(int(m.group(1))):
                shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------- executing one run
@lru_cache(maxsize=1)
def code_version() -> str:
    """onlinegp's version and, when it runs from a git checkout, the commit ('+dirty' with uncommitted edits or new
    files in src/): recorded with every finished run, so a table says which code produced it. Taken once per
    process, before its first run, i.e. when the code it runs was imported."""
    from ... import __version__

    src = Path(__file__).resolve().parents[2]
    try:
        git = lambda *a: subprocess.run(
            ["git", "-C", str(src), *a],
            capture_output=True,
            text=True,  # noqa: E731
            timeout=20,
            check=True,
        ).stdout.strip()
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=normal", "--", ".")
    except (OSError, subprocess.SubprocessError):
        return __version__
    return f"{__version__} (git {commit}{'+dirty' if dirty else ''})"


@lru_cache(maxsize=1)
def machine_kind() -> str:
    """A digest of what moves a run's last digits besides the code: the CPU's feature flags (the Attentive Kernel's
    routine is built with -march=native; BLAS picks its kernels by CPU) and the torch build. Recorded with every
    run: ``onlinegp bench verify`` expects exact reproduction on the same kind only."""
    import torch

    return hashlib.sha256(f"{native._cpu_signature()}|{torch.__version__}".encode()).hexdigest()[:12]


def is_dirty(code: str) -> bool:
    """True for a :func:`code_version` of a checkout with uncommitted changes in src/: runs of such code are not
    kept in the results tree, since nobody could check out the code that made them."""
    return code.endswith("+dirty)")


def _init_worker(threads: int | None, parent: int) -> None:
    """A local worker process: limit its threads, and on Linux have it killed when the sweep's process dies (so no
    orphan keeps writing into a run directory that a rerun uses)."""
    _set_threads(threads)
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the sweep died before the call
            os._exit(1)


def _set_threads(threads: int | None) -> None:
    """Limit BLAS/torch threads of the current process (before or after torch is imported; one in the portable
    mode)."""
    threads = portable.threads(threads)
    if threads is None:
        return
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def _execute(fn: JobFn, config: dict, run_dir: str) -> dict:
    """Run ``fn`` into ``run_dir``; never raises for the job's own errors, returns the outcome instead."""
    path = Path(run_dir)
    path.mkdir(parents=True, exist_ok=True)
    code, machine, numerics = code_version(), machine_kind(), native.numerics()
    t0 = time.perf_counter()
    try:
        value = fn(config, path)
        json.dumps(value, allow_nan=True)
        ok, error = True, None
    except Exception:
        value, ok, error = None, False, traceback.format_exc()
    seconds = time.perf_counter() - t0
    return {
        "ok": ok,
        "seconds": seconds,
        "value": value,
        "error": error,
        "code": code,
        "machine": machine,
        "numerics": numerics,
    }


def _execute_packed(fn: JobFn, config: dict, threads: int | None) -> dict:
    """Ray task body: run into a scratch directory on the executing node and return the files with the outcome."""
    _set_threads(threads)
    with tempfile.TemporaryDirectory(prefix="onlinegp-run-") as scratch:
        outcome = _execute(fn, config, scratch)
        root = Path(scratch)
        outcome["files"] = {
            p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*"))
            if p.is_file() and p.name not in (MARKER, ERROR_FILE)
        }
    return outcome


def _unpack(run_dir: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        target = run_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _last_line(error: str) -> str:
    lines = [ln for ln in error.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "unknown error"


# ---------------------------------------------------------------------- progress
class _Progress:
    """A rich progress bar: runs done / running / failed (silent when ``quiet``)."""

    def __init__(self, total: int, skipped: int, quiet: bool, title: str):
        self.total, self.skipped, self.quiet, self.title = total, skipped, quiet, title
        self.done = self.failed = self.running = 0
        self._progress = None

    def __enter__(self) -> "_Progress":
        if not self.quiet:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                transient=False,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task(self._text(), total=self.total, completed=self.skipped)
        return self

    def _text(self) -> str:
        skipped = f", {self.skipped} skipped" if self.skipped else ""
        return f"{self.title}: {self.done} done, {self.running} running, [red]{self.failed} failed[/red]{skipped}"

    def update(self, running: int, finished: RunResult | None = None) -> None:
        self.running = running
        if finished is not None:
            self.done += finished.status == "done"
            self.failed += finished.status == "failed"
        if self._progress is not None:
            self._progress.update(
                self._task, description=self._text(), completed=self.skipped + self.done + self.failed
            )
            if finished is not None and finished.status == "failed":
                self._progress.console.print(f"[red]failed[/red] {finished.run_id}: {finished.error}")

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)


# ---------------------------------------------------------------------- backends
def _record(spec: RunSpec, run_dir: Path, outcome: dict) -> RunResult:
    if outcome["ok"]:
        _mark_done(run_dir, spec, outcome)
        return RunResult(spec.run_id, run_dir, "done", outcome["seconds"], outcome["value"])
    _mark_failed(run_dir, outcome["error"])
    return RunResult(spec.run_id, run_dir, "failed", outcome["seconds"], error=_last_line(outcome["error"]))


def _run_inprocess(
    fn: JobFn, todo: list[RunSpec], root: Path, opts: RunnerOptions, bar: _Progress
) -> Iterator[RunResult]:
    threads = portable.threads(opts.threads)
    torch = sys.modules.get("torch") if threads is not None else None
    before = torch.get_num_threads() if torch is not None else None
    try:
        for spec in todo:
            if torch is not None:
                torch.set_num_threads(threads)
            bar.update(running=1)
            run_dir = root / spec.run_id
            result = _record(spec, run_dir, _execute(fn, spec.config, str(run_dir)))
            bar.update(running=0, finished=result)
            yield result
    finally:
        if torch is not None:
            torch.set_num_threads(before)


def _run_processes(
    fn: JobFn, todo: list[RunSpec], root: Path, opts: RunnerOptions, bar: _Progress
) -> Iterator[RunResult]:
    threads = opts.threads or max(1, (os.cpu_count() or 1) // opts.workers)
    with ProcessPoolExecutor(
        max_workers=opts.workers,
        mp_context=get_context("spawn"),
        initializer=_init_worker,
        initargs=(threads, os.getpid()),
    ) as pool:
        pending = {pool.submit(_execute, fn, spec.config, str(root / spec.run_id)): spec for spec in todo}
        bar.update(running=min(opts.workers, len(pending)))
        while pending:
            finished, _ = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in finished:
                spec = pending.pop(future)
                try:
                    outcome = future.result()
                except BrokenProcessPool as err:
                    outcome = {
                        "ok": False,
                        "seconds": 0.0,
                        "value": None,
                        "error": f"worker process died abruptly (killed or crashed: {err}); "
                        "rerun the sweep to retry this run",
                    }
                result = _record(spec, root / spec.run_id, outcome)
                bar.update(running=min(opts.workers, len(pending)), finished=result)
                yield result


def _import_ray():
    try:
        import ray
    except ImportError as err:
        raise ValueError(
            "--backend ray needs Ray: pip install 'onlinegp[ray]' (or use the default --backend local)"
        ) from err
    return ray


def _run_ray(fn: JobFn, todo: list[RunSpec], root: Path, opts: RunnerOptions, bar: _Progress) -> Iterator[RunResult]:
    ray = _import_ray()
    started = not ray.is_initialized()
    if started:
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": not opts.quiet,
            "logging_level": "warning",
        }
        if opts.address is None:
            kwargs["num_cpus"] = opts.workers * opts.cpus_per_run
        try:
            ray.init(address=opts.address, **kwargs)
        except (OSError, RuntimeError) as err:  # no cluster at the address, or it did not answer
            raise ValueError(
                f"cannot start or reach Ray{f' at {opts.address!r}' if opts.address else ''}: {err}. "
                "Start a cluster with `ray start --head` (then --address auto), or drop --address to "
                "start a local instance"
            ) from err
    try:
        slots = max(1, int(ray.cluster_resources().get("CPU", 1) // opts.cpus_per_run))
        task = ray.remote(num_cpus=opts.cpus_per_run, max_retries=0)(_execute_packed)
        fn_ref = ray.put(fn)
        pending = {task.remote(fn_ref, spec.config, opts.threads or opts.cpus_per_run): spec for spec in todo}
        bar.update(running=min(slots, len(pending)))
        while pending:
            finished, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            for ref in finished:
                spec = pending.pop(ref)
                run_dir = root / spec.run_id
                try:
                    outcome = ray.get(ref)
                except Exception as err:  # the task's worker died or Ray lost it: report, do not stop the sweep
                    outcome = {
                        "ok": False,
                        "seconds": 0.0,
                        "value": None,
                        "files": {},
                        "error": f"Ray task failed: {type(err).__name__}: {err}",
                    }
                run_dir.mkdir(parents=True, exist_ok=True)
                _unpack(run_dir, outcome.pop("files"))
                result = _record(spec, run_dir, outcome)
                bar.update(running=min(slots, len(pending)), finished=result)
                yield result
    finally:
        if started:
            ray.shutdown()


def run_sweep(  # noqa: PLR0912 - a sweep's resume, backends and results tree
    specs: Sequence[RunSpec],
    fn: JobFn,
    root: str | Path,
    options: RunnerOptions | None = None,
    title: str = "runs",
    summary: Sequence[str] = (),
) -> SweepResult:
    """Execute every unfinished spec with ``fn(config, root / run_id)``; see the module docstring. ``title`` names the
    sweep (progress bar, and its directory in the results tree); ``summary`` holds the glob patterns, relative to a
    run directory, of the small files kept in the results tree."""
    opts = options or RunnerOptions()
    specs = list(specs)
    _check_specs(specs)
    code = code_version()  # this process's code, before any edit made while the sweep runs
    root = Path(root)
    store = None
    if opts.results is not None:
        if not title or title != Path(title).name or title.startswith("."):
            raise ValueError(f"a sweep kept in the results tree needs a plain directory name as title, got {title!r}")
        store = Path(opts.results) / title
        _remove_leftovers(store)
    keep = store is not None and not is_dirty(code)
    if store is not None and not keep and not opts.quiet:
        print(
            f"onlinegp: the code has uncommitted changes ({code}): new runs go to {root} only, not into {store}; "
            "commit, then rerun the sweep to keep them",
            file=sys.stderr,
        )
    root.mkdir(parents=True, exist_ok=True)
    atomic_write(root / SWEEP_FILE, json.dumps({"runs": [asdict(s) for s in specs]}, indent=1))
    if opts.kept_only is not None:
        return _restore_kept(specs, root, store, title, opts.kept_only)
    results: dict[str, RunResult] = {}
    todo = []
    for spec in specs:
        run_dir = root / spec.run_id
        if opts.fresh:
            shutil.rmtree(run_dir, ignore_errors=True)
            todo.append(spec)
            continue
        committed = store is not None and is_finished(store / spec.config_hash, spec)
        restored = committed and not is_finished(run_dir, spec)
        if restored:
            restore_summary(store / spec.config_hash, run_dir)
        if not is_finished(run_dir, spec):
            todo.append(spec)
            continue
        if keep and not committed and not is_dirty(_code_of(run_dir) or "+dirty)"):  # finished, not kept yet
            save_summary(run_dir, store / spec.config_hash, spec, summary, job_name(fn))
        marker = json.loads((run_dir / MARKER).read_text())
        results[spec.run_id] = RunResult(
            spec.run_id, run_dir, "skipped", marker.get("seconds", 0.0), marker.get("value"), restored=restored
        )
    if opts.backend == "ray":
        execute = _run_ray
    else:
        execute = _run_inprocess if opts.workers == 1 else _run_processes
    by_id = {spec.run_id: spec for spec in todo}
    with _Progress(len(specs), len(specs) - len(todo), opts.quiet, title) as bar:
        if todo:
            for result in execute(fn, todo, root, opts, bar):
                if result.status == "done" and keep:
                    spec = by_id[result.run_id]
                    save_summary(result.run_dir, store / spec.config_hash, spec, summary, job_name(fn))
                results[result.run_id] = result
    return SweepResult(root, [results[s.run_id] for s in specs], store, specs)
