"""Output files written whole or not at all: :func:`atomic_write` and, through it, :func:`write_csv`; run directories
that never reuse an existing one: :func:`fresh_directory`; a run directory never taken over by another run without
``--force``: :func:`claim_run_directory`."""

from __future__ import annotations

import csv
import io
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO


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
#: files that tell the kind of a run written before the marker existed (checked in this order)
LEGACY_RUNS = (("checkpoint.pt", "mission"), ("survey.npz", "mission"), ("comparison.md", "replay"))


def run_kind(path: str | Path) -> str | None:
    """The kind of run ``path`` holds: its :data:`RUN_MARKER`'s, else one told by an older run's files
    (:data:`LEGACY_RUNS`; ``config.json`` with ``metrics.csv``: a stream), else ``"unknown files"``; None when
    ``path`` is missing or empty."""
    path = Path(path)
    if not path.is_dir() or not any(path.iterdir()):
        return None
    if (path / RUN_MARKER).is_file():
        return (path / RUN_MARKER).read_text().strip()
    for name, kind in LEGACY_RUNS:
        if (path / name).is_file():
            return kind
    return "stream" if (path / "config.json").is_file() and (path / "metrics.csv").is_file() else "unknown files"


def claim_run_directory(path: str | Path, kind: str, force: bool = False, reuse: bool = False) -> Path:
    """Make ``path`` the run directory of a ``kind`` run and mark it so (:data:`RUN_MARKER`).

    A directory holding another run (or other files) is refused with a ValueError that names ``--force``; with
    ``force`` it is emptied first, so no file of the old run is left. ``reuse`` lets a run of the same kind continue
    in its own directory (a resumable sweep, a mission's ``--resume``), and one made before the marker existed."""
    path = Path(path)
    held = run_kind(path)
    if held is not None and not (reuse and held in (kind, "unknown files")):
        if not force:
            what = "other files" if held == "unknown files" else f"a {held} run"
            raise ValueError(
                f"{path} holds {what}: pass --force to replace it, or another --out (none: a new directory)"
            )
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    atomic_write(path / RUN_MARKER, kind + "\n")
    return path
