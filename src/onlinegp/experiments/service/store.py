"""The service's durable log: one SQLite database (WAL mode, synchronous FULL) in the run directory.

* ``observations``: every acknowledged row, in the order it was committed (``seq``), with the vehicle that posted
  it and the batch it went into (``batch_id``, NULL while the row waits in the open batch);
* ``batches``: each closed batch's range of ``seq`` (its rows are exactly those, in ``seq`` order), recorded before
  the model sees it, so that a replay after a crash applies the same batches as the service that was killed;
* ``tokens``: each vehicle's write token, as the SHA-256 of the token (the token itself is shown once and not kept).

A connection is shared by the service's threads under one lock; each write is one transaction, committed before
the method returns.
"""

from __future__ import annotations

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
    created REAL NOT NULL
);
"""


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

    def close(self) -> None:
        with self.lock:
            self.db.close()

    # ------------------------------------------------------------------ tokens
    def add_token(self, name: str) -> str:
        """A new token for vehicle ``name`` (replacing its old one); only its hash is stored."""
        if not name or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise ValueError(f"a vehicle name is letters, digits, '-', '_' and '.', got {name!r}")
        token = secrets.token_urlsafe(32)
        with self.lock:
            self.db.execute(
                "INSERT OR REPLACE INTO tokens (name, hash, created) VALUES (?, ?, ?)",
                (name, token_hash(token), time.time()),
            )
        return token

    def remove_token(self, name: str) -> bool:
        """Revoke vehicle ``name``'s token (its writes are refused from now on); whether it had one."""
        with self.lock:
            return self.db.execute("DELETE FROM tokens WHERE name = ?", (name,)).rowcount > 0

    def token_names(self) -> list[tuple[str, float]]:
        """The vehicles holding a token, with when it was made."""
        with self.lock:
            return self.db.execute("SELECT name, created FROM tokens ORDER BY name").fetchall()

    def vehicle_of(self, token: str) -> str | None:
        """The vehicle whose token this is, or None."""
        with self.lock:
            row = self.db.execute("SELECT name FROM tokens WHERE hash = ?", (token_hash(token),)).fetchone()
        return None if row is None else row[0]

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
        with self.lock:
            n, oldest = self.db.execute(
                "SELECT COUNT(*), MIN(received) FROM observations WHERE batch_id IS NULL"
            ).fetchone()
        return n, oldest

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

    def last_batch(self) -> int:
        with self.lock:
            return self.db.execute("SELECT COALESCE(MAX(batch_id), 0) FROM batches").fetchone()[0]

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
