"""Named datasets: UCI regression sets, the magnetic-field survey, toy sets and the synthetic streams of
Pescador-Barrios et al. 2024.

Everything loads from files shipped inside the package (see ``README.md`` in this folder for sources and
licences), so no network or ``../shared`` is needed. ``load_dataset(name)`` is the one entry point; a path to a
CSV file (no header, last column the target) also works.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from .dataset import Dataset

HERE = Path(__file__).resolve().parent

#: UCI sets shipped in ``uci/<name>.csv.gz`` (from the MIT-licensed ``uci_datasets`` collection)
UCI = ("concrete", "skillcraft", "elevators", "bike", "kin40k", "pumadyn32nm", "protein")
#: Pescador-Barrios et al. 2024, appendix F.3: 20 batches below this many points, 50 above
LARGE = 12_000
MAGNETIC_CITATION = (
    "Solin, Kok, Wahlström, Schön, Särkkä: Modeling and interpolation of the ambient magnetic "
    "field by Gaussian processes. IEEE Transactions on Robotics 34(4), 2018."
)
UCI_CITATION = (
    "Dua & Graff, UCI Machine Learning Repository (https://archive.ics.uci.edu), as prepared by the "
    "MIT-licensed uci_datasets collection (https://github.com/treforevans/uci_datasets)."
)


def _read(path: Path, delimiter: str | None = ",") -> np.ndarray:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return np.loadtxt(f, delimiter=delimiter, ndmin=2)


def uci(name: str, row_index: bool = False) -> Dataset:
    """A UCI regression set: every column but the last is an input, the last is the target. ``row_index`` prepends
    each row's index in the bundled file as the first input, as the data files of Pescador-Barrios et al.'s code do
    for elevators and bike (their loader reads it as an input, so that sorting by the first input streams file
    order)."""
    data = _read(HERE / "uci" / f"{name}.csv.gz")
    n = data.shape[0]
    X = np.column_stack([np.arange(n, dtype=np.float64), data[:, :-1]]) if row_index else data[:, :-1]
    return Dataset(
        X,
        data[:, -1],
        name,
        default_order="sorted",
        default_batches=20 if n < LARGE else 50,
        meta={"source": "uci", "citation": UCI_CITATION},
    )


def magnetic(trajectories: Iterable[int] = (1, 2, 3, 4, 5)) -> Dataset:
    """The InvenSense magnetometer survey of a 6 m × 6 m room (Solin et al. 2018), trajectories 1–5.

    Inputs are the 2-D positions (m); the target is the field strength, the norm of the 3-axis field (μT).
    ``groups`` is the trajectory number and ``time`` runs on across trajectories in the order given, so the
    default stream (order 'time', batches 'groups') feeds one trajectory per batch,
    as Pescador-Barrios et al. 2024, §5.4.
    """
    X, y, t, g = [], [], [], []
    offset = 0.0
    for k in trajectories:
        if int(k) not in range(1, 6):
            raise ValueError(f"magnetic trajectories are numbered 1 to 5, got {k}")
        base = HERE / "magnetic" / f"{int(k)}"
        loc, mag = _read(Path(f"{base}-loc.csv.gz")), _read(Path(f"{base}-mag.csv.gz"))
        time = _read(Path(f"{base}-time.csv.gz"))[:, 0]
        X.append(loc)
        y.append(np.linalg.norm(mag, axis=1))
        t.append(time - time[0] + offset)
        offset = t[-1][-1] + 1.0
        g.append(np.full(len(time), int(k)))
    name = (
        "magnetic"
        if tuple(trajectories) == (1, 2, 3, 4, 5)
        else "magnetic-" + "".join(str(int(k)) for k in trajectories)
    )
    return Dataset(
        np.concatenate(X),
        np.concatenate(y),
        name,
        time=np.concatenate(t),
        groups=np.concatenate(g),
        default_order="time",
        default_batches="groups",
        meta={"source": "magnetic", "citation": MAGNETIC_CITATION, "units": {"x": "m", "y": "uT"}},
    )


def toy_regression() -> Dataset:
    """The 1-D regression toy set of the streaming sparse GP paper's public release (Bui et al. 2017)."""
    x, y = _read(HERE / "toy" / "reg_toy_x.txt.gz", None), _read(HERE / "toy" / "reg_toy_y.txt.gz", None)
    return Dataset(x, y[:, 0], "toy", default_order="sorted", default_batches=10, meta={"source": "toy"})


def banana(split: str = "train") -> Dataset:
    """The 2-D banana binary classification set, 'train' or 'test' part; labels mapped from ±1 to 1/0."""
    if split not in ("train", "test"):
        raise ValueError(f"banana split must be 'train' or 'test', got {split!r}")
    x = _read(HERE / "toy" / f"banana_{split}_x.txt.gz")
    y = (_read(HERE / "toy" / f"banana_{split}_y.txt.gz", None)[:, 0] > 0).astype(np.float64)
    return Dataset(
        x,
        y,
        f"banana-{split}",
        default_order="random",
        default_batches=10,
        meta={"source": "toy", "task": "classification"},
    )


def synthetic_function(x: np.ndarray) -> np.ndarray:
    """Pescador-Barrios et al. 2024, appendix F.1: f(x) = sin(2x) + cos(5x)."""
    return np.sin(2 * x) + np.cos(5 * x)


def synthetic(which: int, seed: int = 0, noise_std: float = 0.3) -> Dataset:
    """The synthetic datasets 1–3 of Pescador-Barrios et al. 2024 (appendix F.1), f(x) = sin(2x) + cos(5x) plus Gaussian
    noise.

    1. 500 points uniform on [0, 10], sorted, ten batches (an expanding domain);
    2. 150 points uniform on [0, 10], shuffled, ten batches (the same distribution every batch);
    3. 1000 points uniform on [4, 6] and 300 Cauchy(5, 1) outliers placed in the last five of ten batches.

    The stream order and batches are part of the definition (``groups`` holds the batch number).
    """
    rng = np.random.default_rng(seed)
    if which == 1:
        x = np.sort(rng.uniform(0, 10, 500))
        groups = np.repeat(np.arange(10), 50)
    elif which == 2:
        x = rng.uniform(0, 10, 150)
        groups = np.repeat(np.arange(10), 15)
    elif which == 3:
        inner = np.array_split(rng.uniform(4, 6, 1000), 10)
        outer = np.array_split(5 + rng.standard_cauchy(300), 5)
        parts = [inner[b] if b < 5 else np.concatenate([inner[b], outer[b - 5]]) for b in range(10)]
        parts = [p[rng.permutation(len(p))] for p in parts]
        x = np.concatenate(parts)
        groups = np.concatenate([np.full(len(p), b) for b, p in enumerate(parts)])
    else:
        raise ValueError(
            f"synthetic datasets are numbered 1, 2, 3 (Pescador-Barrios et al. 2024, appendix F.1), got {which}"
        )
    y = synthetic_function(x) + noise_std * rng.standard_normal(len(x))
    return Dataset(
        x[:, None],
        y,
        f"synthetic{which}",
        time=np.arange(len(x), dtype=np.float64),
        groups=groups,
        default_order="given",
        default_batches="groups",
        meta={"source": "synthetic", "seed": seed, "noise_std": noise_std},
    )


def csv_file(path: str | Path, **columns: Any) -> Dataset:
    """Any CSV (optionally .gz), header optional: by default the last column the target, the others inputs, a
    header's ``time`` or ``batch`` column the recording time or batch of each row; ``columns`` (``target``,
    ``inputs``, ``batch``, ``time``, ``dropna``) go to :func:`onlinegp.tables.read_table`. ``meta["roles"]`` names
    the columns of each role."""
    from ..tables import read_table

    path = Path(path)
    table = read_table(path, **columns)
    n = len(table.y)
    return Dataset(
        table.x,
        table.y,
        path.name.split(".")[0],
        time=table.key if table.key_role == "time" else None,
        groups=table.key if table.key_role == "batch" else None,
        default_batches=20 if n < LARGE else 50,
        meta={"source": str(path), "roles": table.roles(), **({"frame": table.frame} if table.frame else {})},
    )


LOADERS: dict[str, Callable[..., Dataset]] = {
    **{name: (lambda n: lambda **o: uci(n, **o))(name) for name in UCI},
    "magnetic": magnetic,
    "toy": toy_regression,
    "banana": banana,
    **{f"synthetic{k}": (lambda k: lambda **o: synthetic(k, **o))(k) for k in (1, 2, 3)},
}


def list_datasets() -> list[str]:
    """Names accepted by :func:`load_dataset`."""
    return sorted(LOADERS)


def load_dataset(name: str, **options: Any) -> Dataset:
    """Load a named dataset (``list_datasets()``) or a CSV file by path; ``options`` go to its loader.

    Examples: ``load_dataset("concrete")``, ``load_dataset("magnetic", trajectories=[3])``,
    ``load_dataset("synthetic1", seed=0)``, ``load_dataset("banana", split="test")``.
    """
    key = str(name).lower()
    if key in LOADERS:
        try:
            return LOADERS[key](**options)
        except TypeError as err:
            raise ValueError(f"dataset {name!r} does not take the options {sorted(options)}: {err}") from None
    if Path(name).suffix in (".csv", ".gz", ".txt") and Path(name).is_file():
        return csv_file(name, **options)
    raise ValueError(f"unknown dataset {name!r}: choose one of {', '.join(list_datasets())} or pass a CSV path")
