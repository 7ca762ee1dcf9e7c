"""Streaming-regression experiments: feed a dataset to an online model batch by batch and score every step.

Protocol (Pescador-Barrios et al. 2024, §5.3 and appendix F.3): an 80/20 train/test split with a seed, the training part
streamed in ``batches`` batches in the chosen order (sorted by the first input, random, time), after each batch the
model predicts the whole test set. With ``scaling="standard"`` (default, the preprocessing of Pescador-Barrios et al.'s
code) inputs and targets are standardised with the training part's mean and standard deviation before streaming and the
model's own scaler is the identity, so kernel settings mean what the paper says (length-scale 1 = one standard
deviation); ``scaling="minmax"`` instead gives the model the training part's box and target statistics. RMSE and
NLPD are reported in standardised target units either way, so numbers compare across datasets as in Table 1. Every run writes ``config.json``,
``metrics.csv``/``metrics.json`` (one row per batch) and ``metrics.png`` to its output folder.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..base import OnlineGP, model_record
from ..data import Dataset, batch_indices, chunked_fold_split, load_dataset, train_test_split
from ..io import write_csv
from ..kernels import native
from ..metrics import nlpd, rmse
from ..models.registry import make_recorded_model
from .protocols import lbfgs_exact_gp


@dataclass
class StreamConfig:
    """One streaming run. ``options`` go to the model constructor (e.g. ``{"delta": 0.05}`` for VIPS). ``split``:
    'random' (:func:`~onlinegp.data.train_test_split` of ``seed``, then the training part in ``order`` and
    ``batches``) or 'chunked' (:func:`~onlinegp.data.chunked_fold_split`, Pescador-Barrios et al.'s code: ``seed``
    is the fold of ``round(1 / test_fraction)``, the batches its sorted chunks; ``order`` must be unset or 'sorted')."""

    dataset: str
    model: str = "vips"
    batches: int | None = None
    order: str | None = None
    seed: int = 0
    test_fraction: float = 0.2
    max_size: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    eval_batches: list[int] | None = None
    scaling: str = "standard"
    dataset_options: dict[str, Any] = field(default_factory=dict)
    split: str = "random"

    def to_json(self) -> dict:
        """The config as JSON; ``split`` only when not 'random' (the runs kept before it existed keep their keys)."""
        record = asdict(self)
        if self.split == "random":
            del record["split"]
        return record


def standardised_scores(test: Dataset, mean: np.ndarray, var_y: np.ndarray, y_std: float) -> dict[str, float]:
    """RMSE and NLPD of the test targets in units where the training targets have standard deviation 1."""
    return {"rmse": rmse(test.y, mean) / y_std, "nlpd": nlpd(test.y, mean, var_y) - math.log(y_std)}


def prepare(config: StreamConfig) -> tuple[Dataset, Dataset, list[np.ndarray], dict[str, Any], float]:
    """The stream of ``config``: (train, test, the training part's batches as index arrays, the model's scaling
    keywords, the target units' standard deviation), scaled as ``config.scaling`` says."""
    ds = load_dataset(config.dataset, **config.dataset_options)
    if config.max_size is not None:
        ds = ds.subsample(config.max_size, seed=config.seed)
    if config.split == "random":
        train, test = train_test_split(ds, seed=config.seed, test_fraction=config.test_fraction)
        parts = batch_indices(train, config.order, config.batches, seed=config.seed)
    elif config.split == "chunked":
        folds = round(1 / config.test_fraction)
        if config.order not in (None, "sorted") or not math.isclose(folds * config.test_fraction, 1.0):
            raise ValueError(
                "split='chunked' streams the chunks sorted by the first input and holds out one fold of "
                f"1 / test_fraction; got order {config.order!r} and test_fraction {config.test_fraction}"
            )
        chunks = config.batches or ds.default_batches
        train, test, parts = chunked_fold_split(ds, config.seed, folds, chunks)
    else:
        raise ValueError(f"split must be 'random' or 'chunked', got {config.split!r}")
    y_mean, y_std = float(train.y.mean()), float(train.y.std()) or 1.0
    if config.scaling == "standard":
        x_mean, x_std = train.X.mean(0), train.X.std(0) + 1e-6
        train, test = (replace(d, X=(d.X - x_mean) / x_std, y=(d.y - y_mean) / y_std) for d in (train, test))
        ones = np.ones(train.input_dim)
        return train, test, parts, dict(x_bounds=np.stack([-ones, ones]), y_stats=(0.0, 1.0), seed=config.seed), 1.0
    if config.scaling == "minmax":
        common = dict(x_bounds=np.stack([train.X.min(0), train.X.max(0)]), y_stats=(y_mean, y_std), seed=config.seed)
        return train, test, parts, common, y_std
    raise ValueError(f"scaling must be 'standard' or 'minmax', got {config.scaling!r}")


def run_stream(
    config: StreamConfig,
    out: str | Path | None = None,
    quiet: bool = True,
    on_batch: Callable[[dict, OnlineGP, np.ndarray], None] | None = None,
) -> list[dict]:
    """Run one streaming experiment; returns the per-batch rows (and writes them to ``out`` if given).

    Model 'exact' is refitted from scratch on all data seen so far with L-BFGS, only at ``eval_batches``
    (1-based; default every batch) since it costs O(N³). ``on_batch(row, model, batch_inputs)`` is called after
    every evaluated batch (e.g. to draw maps). With ``out``, ``metrics.csv`` is rewritten after every evaluated
    batch, so an interrupted run keeps the batches it finished.
    """
    from tqdm import tqdm  # only where a bar is drawn: importing the experiments loads no tqdm

    train, test, parts, common, y_std = prepare(config)
    exact = config.model.lower() == "exact"
    evals = set(config.eval_batches or range(1, len(parts) + 1))
    model = None if exact else make_recorded_model(config.model, train.input_dim, **common, **config.options)
    rows: list[dict] = []
    seen = 0
    for b, idx in enumerate(tqdm(parts, desc=f"{config.model} on {train.name}", disable=quiet, leave=False), start=1):
        seen += len(idx)
        row: dict[str, Any] = {"batch": b, "num_data": seen}
        if exact:
            if b not in evals:
                continue
            model = make_recorded_model(
                "exact", train.input_dim, num_steps=0, max_data=10**9, **common, **config.options
            )
            t0 = time.perf_counter()
            X_seen = train.X[np.concatenate(parts[:b])]
            y_seen = train.y[np.concatenate(parts[:b])]
            lbfgs_exact_gp(model, X_seen, y_seen)
            row.update(num_inducing=seen, update_time=time.perf_counter() - t0)
        else:
            report = model.update(train.X[idx], train.y[idx])
            row.update(
                num_inducing=report.num_inducing,
                update_time=report.total_time,
                jitter=report.jitter,
                objective=report.objective,
                **{k: v for k, v in report.extra.items() if isinstance(v, (int, float))},
            )
            if b not in evals:
                rows.append(row)
                continue
        t0 = time.perf_counter()
        pred = model.predict(test.X)
        row["predict_time"] = time.perf_counter() - t0
        row.update(standardised_scores(test, pred.mean.numpy(), pred.var_y.numpy(), y_std))
        rows.append(row)
        if out is not None:  # the scores so far survive an interrupted run
            Path(out).mkdir(parents=True, exist_ok=True)
            write_csv(Path(out) / "metrics.csv", rows)
        if on_batch is not None:
            on_batch(row, model, train.X[idx])
    if out is not None:
        write_run(Path(out), config, rows, model, frame=train.meta.get("frame"))
    return rows


def write_run(
    out: Path, config: StreamConfig, rows: list[dict], model: OnlineGP | None = None, frame: dict | None = None
) -> None:
    """config.json (the run's settings and, under ``model_record``, the options the model ran with: :func:`model_record`;
    the local frame of a CSV read with ``lonlat``), metrics.csv, metrics.json and metrics.png of one streaming run."""
    from .plots import plot_metric_curves

    out.mkdir(parents=True, exist_ok=True)
    record = config.to_json() | ({} if model is None else {"model_record": model_record(model)})
    record["numerics"] = native.numerics()
    if frame is not None:
        record["frame"] = frame
    (out / "config.json").write_text(json.dumps(record, indent=1, default=repr))
    (out / "metrics.json").write_text(json.dumps(rows, indent=1))
    write_csv(out / "metrics.csv", rows)
    scored = [r for r in rows if "rmse" in r]
    if scored:
        plot_metric_curves(
            scored,
            out / "metrics.png",
            keys=("num_inducing", "rmse", "nlpd", "update_time"),
            x_key="num_data",
            title=f"{config.model} on {Path(config.dataset).stem} (seed {config.seed})",
        )
