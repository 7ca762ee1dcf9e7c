"""Streaming datasets: UCI regression, the magnetic-field survey, toy sets, the synthetic streams of
Pescador-Barrios et al. 2024.

>>> from onlinegp.data import load_dataset, train_test_split, stream
>>> ds = load_dataset("concrete")
>>> train, test = train_test_split(ds, seed=0)            # 80/20, deterministic in the seed
>>> for X, y in stream(train, order="sorted", batches=20):  # sorted by the first input, 20 batches
...     pass
"""

from .dataset import (
    ORDERS,
    Dataset,
    batch_indices,
    chunked_fold_split,
    order_indices,
    split_batches,
    stream,
    train_test_split,
)
from .sources import LOADERS, UCI, list_datasets, load_dataset, synthetic, synthetic_function

__all__ = [
    "Dataset",
    "ORDERS",
    "UCI",
    "LOADERS",
    "batch_indices",
    "chunked_fold_split",
    "list_datasets",
    "load_dataset",
    "order_indices",
    "split_batches",
    "stream",
    "synthetic",
    "synthetic_function",
    "train_test_split",
]
