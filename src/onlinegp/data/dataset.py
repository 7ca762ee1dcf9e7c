"""A dataset for streaming experiments, its train/test splits, stream orders and batches.

A :class:`Dataset` holds inputs ``X`` (N, D) and targets ``y`` (N,) as float64 NumPy arrays in the order they were
recorded, with optional recording ``time`` and ``groups`` (a batch or trajectory label per row, for datasets whose
batches are part of their definition). Streams follow Pescador-Barrios et al. 2024 (§5, appendix F): sorted by the first
input dimension (an expanding domain), random, or by time; then split into contiguous batches.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

ORDERS = ("sorted", "random", "time", "given")


@dataclass
class Dataset:
    """Inputs ``X`` (N, D), targets ``y`` (N,), a ``name``, and optional per-row ``time`` and ``groups``.

    ``default_order``/``default_batches`` say how the dataset is streamed when a caller does not choose
    (``default_batches="groups"``: one batch per distinct group label, in order of first appearance).
    ``meta`` holds the source and citation.
    """

    X: np.ndarray
    y: np.ndarray
    name: str
    time: np.ndarray | None = None
    groups: np.ndarray | None = None
    default_order: str = "sorted"
    default_batches: int | str = 20
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.X = np.asarray(self.X, dtype=np.float64)
        self.y = np.asarray(self.y, dtype=np.float64).reshape(-1)
        if self.X.ndim == 1:
            self.X = self.X[:, None]
        if self.X.ndim != 2 or self.X.shape[0] != self.y.shape[0]:
            raise ValueError(
                f"dataset {self.name!r}: X must be (N, D) and y (N,), got {self.X.shape} and {self.y.shape}"
            )
        for attr in ("time", "groups"):
            v = getattr(self, attr)
            if v is not None and len(v) != len(self.y):
                raise ValueError(f"dataset {self.name!r}: {attr} has {len(v)} rows but y has {len(self.y)}")

    def __len__(self) -> int:
        return int(self.y.shape[0])

    @property
    def input_dim(self) -> int:
        return int(self.X.shape[1])

    def subset(self, idx: np.ndarray, name: str | None = None) -> "Dataset":
        """The rows ``idx`` (in that order), keeping time, groups and metadata."""
        idx = np.asarray(idx)
        return replace(
            self,
            X=self.X[idx],
            y=self.y[idx],
            name=name or self.name,
            time=None if self.time is None else self.time[idx],
            groups=None if self.groups is None else self.groups[idx],
            meta=dict(self.meta),
        )

    def subsample(self, n: int, seed: int = 0) -> "Dataset":
        """At most ``n`` rows drawn without replacement (kept in their original order)."""
        if n >= len(self):
            return self
        idx = np.sort(np.random.default_rng(seed).choice(len(self), size=n, replace=False))
        return self.subset(idx)

    def tensors(self, dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
        """``(X, y)`` as torch tensors."""
        return torch.as_tensor(self.X, dtype=dtype), torch.as_tensor(self.y, dtype=dtype)


def train_test_split(ds: Dataset, seed: int = 0, test_fraction: float = 0.2) -> tuple[Dataset, Dataset]:
    """A random ``1 - test_fraction`` / ``test_fraction`` split (80/20 by default, as
    Pescador-Barrios et al. 2024, §5.3).

    Deterministic in ``seed``. Both parts keep the original row order, so a time-ordered stream stays one.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    n = len(ds)
    n_test = int(round(test_fraction * n))
    if n_test < 1 or n_test >= n:
        raise ValueError(f"dataset {ds.name!r} with {n} rows is too small for a {test_fraction:.0%} test split")
    perm = np.random.default_rng(seed).permutation(n)
    test, train = np.sort(perm[:n_test]), np.sort(perm[n_test:])
    return ds.subset(train, f"{ds.name}-train"), ds.subset(test, f"{ds.name}-test")


def chunked_fold_split(
    ds: Dataset, fold: int, folds: int = 5, chunks: int = 20, shuffle_seed: int = 0
) -> tuple[Dataset, Dataset, list[np.ndarray]]:
    """The split and batches of Pescador-Barrios et al.'s published code (their paper's text says "five 80%-training
    and 20%-testing random splits" of the sorted data, :func:`train_test_split`): the whole set sorted by the first
    input and cut into ``chunks`` contiguous chunks (``len // chunks`` rows each, the remainder in the last), each
    chunk's rows permuted (one generator seeded ``shuffle_seed`` for every fold, as their code), and contiguous fold
    ``fold`` of ``folds`` of every permuted chunk held out (scikit-learn's ``KFold`` sizes: the first ``len % folds``
    folds one row longer). Returns (train, test, batches): the training rows chunk after chunk, the held-out rows
    likewise, and each chunk's training rows as one batch of ``train``.
    """
    if not (isinstance(folds, (int, np.integer)) and folds >= 2 and 0 <= fold < folds):
        raise ValueError(f"fold must be one of 0..folds-1 with folds >= 2, got fold {fold!r} of {folds!r}")
    if not isinstance(chunks, (int, np.integer)) or not 1 <= chunks <= len(ds) // folds:
        raise ValueError(f"chunks must be an integer from 1 to {len(ds) // folds} for {len(ds)} rows, got {chunks!r}")
    order = np.argsort(ds.X[:, 0], kind="stable")
    size = len(ds) // chunks
    rng = np.random.default_rng(shuffle_seed)
    train_rows, test_rows, batches = [], [], []
    for c in range(chunks):
        chunk = rng.permutation(order[c * size : (c + 1) * size if c < chunks - 1 else len(ds)])
        lengths = [len(chunk) // folds + (k < len(chunk) % folds) for k in range(folds)]
        start = sum(lengths[:fold])
        held = np.zeros(len(chunk), dtype=bool)
        held[start : start + lengths[fold]] = True
        batches.append(np.arange(len(chunk) - lengths[fold]) + sum(len(t) for t in train_rows))
        train_rows.append(chunk[~held])
        test_rows.append(chunk[held])
    train = ds.subset(np.concatenate(train_rows), f"{ds.name}-train")
    return train, ds.subset(np.concatenate(test_rows), f"{ds.name}-test"), batches


def order_indices(ds: Dataset, order: str, seed: int = 0) -> np.ndarray:
    """Row order of a stream: 'sorted' by the first input (stable), 'random', 'time' or 'given' (as stored)."""
    if order == "sorted":
        return np.argsort(ds.X[:, 0], kind="stable")
    if order == "random":
        return np.random.default_rng(seed).permutation(len(ds))
    if order == "time":
        return np.arange(len(ds)) if ds.time is None else np.argsort(ds.time, kind="stable")
    if order == "given":
        return np.arange(len(ds))
    raise ValueError(f"unknown stream order {order!r}: choose one of {', '.join(ORDERS)}")


def split_batches(idx: np.ndarray, batches: int) -> list[np.ndarray]:
    """Split an index order into ``batches`` contiguous parts of (almost) equal size."""
    if not isinstance(batches, (int, np.integer)) or batches < 1:
        raise ValueError(f"batches must be a positive integer, got {batches!r}")
    if batches > len(idx):
        raise ValueError(f"cannot split {len(idx)} rows into {batches} non-empty batches")
    return [np.asarray(b) for b in np.array_split(np.asarray(idx), int(batches))]


def group_batches(ds: Dataset, idx: np.ndarray) -> list[np.ndarray]:
    """One batch per group label (in order of first appearance along ``idx``)."""
    if ds.groups is None:
        raise ValueError(f"dataset {ds.name!r} has no groups; pass an integer number of batches")
    g = ds.groups[idx]
    _, first = np.unique(g, return_index=True)
    return [idx[g == label] for label in g[np.sort(first)]]


def batch_indices(
    ds: Dataset, order: str | None = None, batches: int | str | None = None, seed: int = 0
) -> list[np.ndarray]:
    """Row indices of each batch of a stream (defaults: the dataset's own order and batch count)."""
    order = ds.default_order if order is None else order
    batches = ds.default_batches if batches is None else batches
    idx = order_indices(ds, order, seed)
    if isinstance(batches, str):
        if batches != "groups":
            raise ValueError(f"batches must be a positive integer or 'groups', got {batches!r}")
        return group_batches(ds, idx)
    return split_batches(idx, batches)


def stream(
    ds: Dataset, order: str | None = None, batches: int | str | None = None, seed: int = 0
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield ``(X_batch, y_batch)`` in stream order (see :func:`batch_indices`)."""
    for b in batch_indices(ds, order, batches, seed):
        yield ds.X[b], ds.y[b]
