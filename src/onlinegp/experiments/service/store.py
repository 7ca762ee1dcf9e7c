"""The service's durable log: one SQLite database (WAL mode, synchronous FULL) in the run directory.

* ``observations``: every acknowledged row, in the order it was committed (``seq``), with the vehicle that posted
  it and the batch it went into (``batch_id``, NULL while the row waits in the open batch);
* ``batches``: each closed batch's range of ``seq`` (its rows are exactly those, in ``seq`` order), recorded before
  the model sees it, so that a replay after a crash applies the same batches as the service that was killed;
* ``tokens``: each token, as its SHA-256 (the token itself is shown once and not kept), with its holder's name, when
  it expires (NULL: never) and whether it only reads (a watcher's, for a service whose reads are protected).

A connection is shared by the service's threads under one lock; each write is one transaction, committed before
the method returns.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np

DATABASE = "observations.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS observations (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    vehicle TEXT NOT NULL,
    x REAL NOT NULL,
    y REAL NOT NULL,
    value REAL NOT NULL,
    time REAL,
    received REAL NOT NULL,
    batch_id INTEGER
);
CREATE INDEX IF NOT EXISTS observations_open ON observations (batch_id, seq);
CREATE TABLE IF NOT EXISTS batches (
    batch_id INTEGER PRIMARY KEY,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    size INTEGER NOT NULL,
    closed REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
    name TEXT PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    created REAL NOT NULL,
    expires REAL,
    reads_only INTEGER NOT NULL DEFAULT 0
);
"""
#: columns added to ``tokens`` since the first log: a log made before them gains them, NULL/0 for its tokens
ADDED_TOKEN_COLUMNS = {"expires": "REAL", "reads_only": "INTEGER NOT NULL DEFAULT 0"}


@dataclasses.dataclass(frozen=True)
class Holder:
    """Who a token belongs to: the vehicle's (or watcher's) ``name``, when the token ``expires`` (epoch seconds, None:
    never) and whether it only reads."""

    name: str
    expires: float | None = None
    reads_only: bool = False

    def expired(self, now: float | None = None) -> bool:
        return self.expires is not None and self.expires <= (time.time() if now is None else now)


def token_hash(token: str) -> str:
    """The SHA-256 (hex) a token is stored as."""
    return hashlib.sha256(token.encode()).hexdigest()


class Store:
    """The log of one run directory (:data:`DATABASE` in ``run_dir``, made if missing)."""

    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / DATABASE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(tokens)")}
        for column, kind in ADDED_TOKEN_COLUMNS.items():
            if column not in columns:
                self.db.execute(f"ALTER TABLE tokens ADD COLUMN {column} {kind}")

    def close(self) -> None:
        with self.lock:
            self.db.close()

    # ------------------------------------------------------------------ tokens
    def add_token(self, name: str, lifetime: float | None = None, reads_only: bool = False) -> str:
        """A new token for ``name`` (replacing its old one), valid for ``lifetime`` seconds (None: until removed), a
        vehicle's (writes and reads) or, with ``reads_only``, a watcher's; only its hash is stored."""
        if not name or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise ValueError(f"a vehicle name is letters, digits, '-', '_' and '.', got {name!r}")
        if lifetime is not None and not lifetime > 0:
            raise ValueError(f"a token's lifetime must be positive, got {lifetime!r} s")
        token, now = secrets.token_urlsafe(32), time.time()
        with self.lock:
            self.db.execute(
                "INSERT OR REPLACE INTO tokens (name, hash, created, expires, reads_only) VALUES (?, ?, ?, ?, ?)",
                (name, token_hash(token), now, None if lifetime is None else now + lifetime, int(reads_only)),
            )
        return token

    def remove_token(self, name: str) -> bool:
        """Revoke ``name``'s token (its requests are refused from now on); whether it had one."""
        with self.lock:
            return self.db.execute("DELETE FROM tokens WHERE name = ?", (name,)).rowcount > 0

    def token_names(self) -> list[tuple[str, float, Holder]]:
        """Each token's holder with when it was made, by name."""
        with self.lock:
            rows = self.db.execute("SELECT name, created, expires, reads_only FROM tokens ORDER BY name").fetchall()
        return [(name, created, Holder(name, expires, bool(reads))) for name, created, expires, reads in rows]

    def holder(self, token: str) -> Holder | None:
        """Whose token this is (expired or not), or None."""
        with self.lock:
            row = self.db.execute(
                "SELECT name, expires, reads_only FROM tokens WHERE hash = ?", (token_hash(token),)
            ).fetchone()
        return None if row is None else Holder(row[0], row[1], bool(row[2]))

    def vehicle_of(self, token: str) -> str | None:
        """The vehicle that may write with this token (not expired, not a watcher's), or None."""
        holder = self.holder(token)
        return None if holder is None or holder.expired() or holder.reads_only else holder.name

    # ------------------------------------------------------------------ observations
    def add(self, vehicle: str, rows: np.ndarray) -> tuple[int, int]:
        """Commit ``rows`` (n, 3) of x, y, value or (n, 4) with the time, all or none; their first and last seq."""
        now = time.time()
        times = rows[:, 3] if rows.shape[1] == 4 else np.full(len(rows), np.nan)
        values = [
            (vehicle, float(x), float(y), float(v), None if np.isnan(t) else float(t), now)
            for (x, y, v), t in zip(rows[:, :3], times)
        ]
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.executemany(
                    "INSERT INTO observations (vehicle, x, y, value, time, received) VALUES (?, ?, ?, ?, ?, ?)",
                    values,
                )
                last = self.db.execute("SELECT last_insert_rowid()").fetchone()[0]
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        return last - len(values) + 1, last

    def count(self) -> int:
        with self.lock:
            return self.db.execute("SELECT COUNT(*) FROM observations").fetchone()[0]

    def backlog(self) -> tuple[int, float | None]:
        """Rows not yet in a closed batch, and when the oldest of them was received (None without any)."""
        n, oldest, _ = self.waiting()
        return n, oldest

    def waiting(self) -> tuple[int, float | None, int]:
        """:meth:`backlog` and the last closed batch's id (0 before any), read together: no batch closes between."""
        with self.lock:
            n, oldest = self.db.execute(
                "SELECT COUNT(*), MIN(received) FROM observations WHERE batch_id IS NULL"
            ).fetchone()
            last = self.db.execute("SELECT COALESCE(MAX(batch_id), 0) FROM batches").fetchone()[0]
        return n, oldest, last

    def close_batch(self, max_rows: int) -> tuple[int, np.ndarray] | None:
        """Close a batch of the oldest open rows (at most ``max_rows``): record its seq range and mark its rows, in
        one transaction. Its id and its rows (n, 2) inputs and (n,) values as one (n, 3) array; None when no row
        is open."""
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                rows = self.db.execute(
                    "SELECT seq, x, y, value FROM observations WHERE batch_id IS NULL ORDER BY seq LIMIT ?",
                    (max_rows,),
                ).fetchall()
                if not rows:
                    self.db.execute("ROLLBACK")
                    return None
                first, last = rows[0][0], rows[-1][0]
                cursor = self.db.execute(
                    "INSERT INTO batches (first_seq, last_seq, size, closed) VALUES (?, ?, ?, ?)",
                    (first, last, len(rows), time.time()),
                )
                batch_id = cursor.lastrowid
                self.db.execute(
                    "UPDATE observations SET batch_id = ? WHERE batch_id IS NULL AND seq BETWEEN ? AND ?",
                    (batch_id, first, last),
                )
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        return batch_id, np.array([r[1:] for r in rows], dtype=np.float64)

    def batches_after(self, batch_id: int) -> list[tuple[int, np.ndarray]]:
        """The closed batches after ``batch_id``, in order, each with its rows (n, 3) read by its recorded range."""
        with self.lock:
            ids = self.db.execute(
                "SELECT batch_id, first_seq, last_seq FROM batches WHERE batch_id > ? ORDER BY batch_id", (batch_id,)
            ).fetchall()
            out = []
            for bid, first, last in ids:
                rows = self.db.execute(
                    "SELECT x, y, value FROM observations WHERE batch_id = ? AND seq BETWEEN ? AND ? ORDER BY seq",
                    (bid, first, last),
                ).fetchall()
                out.append((bid, np.array(rows, dtype=np.float64).reshape(-1, 3)))
        return out

    def vehicles(self) -> dict[str, int]:
        """Each vehicle that has posted, with its number of rows."""
        with self.lock:
            rows = self.db.execute("SELECT vehicle, COUNT(*) FROM observations GROUP BY vehicle").fetchall()
        return dict(rows)

    def track(self, vehicle: str, limit: int = 500) -> np.ndarray:
        """The last ``limit`` positions (n, 2) ``vehicle`` posted, oldest first."""
        with self.lock:
            rows = self.db.execute(
                "SELECT x, y FROM observations WHERE vehicle = ? ORDER BY seq DESC LIMIT ?", (vehicle, limit)
            ).fetchall()
        return np.array(rows[::-1], dtype=np.float64).reshape(-1, 2)

    def all_rows(self) -> list[tuple]:
        """Every row as (seq, vehicle, x, y, value, time, batch_id), in seq order (for checks and exports)."""
        with self.lock:
            return self.db.execute(
                "SELECT seq, vehicle, x, y, value, time, batch_id FROM observations ORDER BY seq"
            ).fetchall()
