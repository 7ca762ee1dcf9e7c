"""Output files written whole or not at all: :func:`atomic_write` and, through it, :func:`write_csv`; run directories
that never reuse an existing one: :func:`fresh_directory`; a run directory never taken over by another run without
``--force``, nor shared with a run still writing to it: :func:`claim_run_directory`."""

from __future__ import annotations

import csv
import io
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

try:
    import fcntl
except ImportError:  # not POSIX: run directories are not locked
    fcntl = None


def atomic_write(path: str | Path, content: str | bytes | Callable[[BinaryIO], Any]) -> Path:
    """Write ``content`` to ``path`` so that readers see the old file or the new one, never part of one.

    ``content`` is text (written as UTF-8), bytes, or a function that writes to a binary file object
    (``lambda fh: torch.save(state, fh)``). It goes to a temporary file in ``path``'s directory, which is flushed,
    synced to disk and renamed over ``path``; on any failure the temporary file is removed and ``path`` is untouched.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            if callable(content):
                content(fh)
            else:
                fh.write(content.encode() if isinstance(content, str) else content)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's files are private; outputs are for whoever can read the directory
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_csv(path: str | Path, rows: Iterable[Mapping[str, Any]], columns: Sequence[str] | None = None) -> Path:
    """``rows`` as a CSV file with a header, written atomically.

    The columns are ``columns`` (other keys are left out) or else every key of the rows in first-seen order; a row
    without a column's key gets an empty cell.
    """
    rows = list(rows)
    if columns is None:
        columns = list(dict.fromkeys(key for row in rows for key in row))
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(columns), extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return atomic_write(path, text.getvalue())


def fresh_directory(parent: str | Path, name: str) -> Path:
    """Create and return a directory under ``parent`` that did not exist before: ``parent/name``, else
    ``name-2``, ``name-3``, ... (claimed with an exclusive ``mkdir``, so two runs never share one)."""
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    for k in range(1, 100_000):
        path = parent / (name if k == 1 else f"{name}-{k}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise RuntimeError(f"no free directory name {name}-N under {parent}")


#: the file naming the kind of run a directory holds ("mission", "stream", "replay", "bench NAME")
RUN_MARKER = ".onlinegp-run"
#: the file a run holds an exclusive lock on (``flock``) in its directory while it runs
RUN_LOCK = ".onlinegp-lock"
#: files that tell the kind of a run written before the marker existed (checked in this order)
LEGACY_RUNS = (("checkpoint.pt", "mission"), ("survey.npz", "mission"), ("comparison.md", "replay"))


def run_kind(path: str | Path) -> str | None:
    """The kind of run ``path`` holds: its :data:`RUN_MARKER`'s, else one told by an older run's files
    (:data:`LEGACY_RUNS`; ``config.json`` with ``metrics.csv``: a stream), else ``"unknown files"``; None when
    ``path`` is missing or empty."""
    path = Path(path)
    if not path.is_dir() or all(p.name == RUN_LOCK for p in path.iterdir()):
        return None
    if (path / RUN_MARKER).is_file():
        return (path / RUN_MARKER).read_text().strip()
    for name, kind in LEGACY_RUNS:
        if (path / name).is_file():
            return kind
    return "stream" if (path / "config.json").is_file() and (path / "metrics.csv").is_file() else "unknown files"


_locks: dict[Path, int] = {}  # run directories this process holds: resolved path -> the locked file descriptor


def _lock_run_directory(path: Path) -> None:
    """Hold an exclusive lock on ``path``'s :data:`RUN_LOCK` until this process ends (again: nothing to do); a
    ValueError when another process holds it."""
    key = path.resolve()
    if fcntl is None:
        return
    if key in _locks:
        lock_file = path / RUN_LOCK
        if lock_file.is_file() and os.fstat(_locks[key]).st_ino == lock_file.stat().st_ino:
            return
        os.close(_locks.pop(key))  # the directory was removed and made again since
    fd = os.open(path / RUN_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise ValueError(
            f"{path} is in use by another run (process {holder}): wait for it to end, or use another --out"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    _locks[key] = fd


def claim_run_directory(path: str | Path, kind: str, force: bool = False, reuse: bool = False) -> Path:
    """Make ``path`` the run directory of a ``kind`` run, mark it so (:data:`RUN_MARKER`) and lock it for the rest of
    this process (:data:`RUN_LOCK`), so that a second run into it while this one is running is refused.

    A directory holding another run (or other files) is refused with a ValueError that names ``--force``; with
    ``force`` it is emptied first, so no file of the old run is left. ``reuse`` lets a run of the same kind continue
    in its own directory (a resumable sweep, a mission's ``--resume``), and one made before the marker existed.
    Temporary files of :func:`atomic_write` left by a killed run are removed."""
    path = Path(path)

    def check() -> str | None:
        held = run_kind(path)
        if held is not None and not (reuse and held in (kind, "unknown files")) and not force:
            what = "other files" if held == "unknown files" else f"a {held} run"
            raise ValueError(
                f"{path} holds {what}: pass --force to replace it, or another --out (none: a new directory)"
            )
        return held

    check()  # before the lock file is made in a directory that is not ours
    path.mkdir(parents=True, exist_ok=True)
    _lock_run_directory(path)
    held = check()  # again under the lock: another run may have written here since
    if held is not None and not (reuse and held in (kind, "unknown files")):
        for entry in path.iterdir():  # force: empty it, keeping the lock file that this run holds
            if entry.name != RUN_LOCK:
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    for tmp in path.glob(".*.tmp"):
        tmp.unlink(missing_ok=True)
    atomic_write(path / RUN_MARKER, kind + "\n")
    return path
