"""Where OSGPR fits θ once M is at its cap: at the selected Z' (Bui et al. 2017 as written, ``fit_inducing='selected'``)
or at Z' and the old inducing inputs it drops (``'union'``, the default under L-BFGS since onlinegp 0.3.0); and at
which noise the old data are charged: the σ² of their batches, fixed in Bui et al.'s summary (``old_noise='fixed'``;
modes 'selected' and 'union'), or the current one (``old_noise='current'``; modes 'selected+current' and
'union+current', the latter the default under L-BFGS since the release after 0.3.0).

Each stream runs once per mode in one process, the modes interleaved batch by batch so that all see the same load:
final test RMSE and NLPD, the largest test RMSE over the batches (a divergence shows there), and the total update
time. Streams: bundled UCI sets of different input widths (the defaults bench's split 0: seeded shuffle,
standardised with the training statistics) and the WGPR bench's lawnmower survey (``bathymetry``), where 'selected'
diverged (issue 35).

    python benchmarks/studies/study_fit_inducing.py                       # writes benchmarks/studies/results/fit_inducing.json
    python benchmarks/studies/study_fit_inducing.py --datasets concrete --train 600 --num-inducing 100
    python benchmarks/studies/study_fit_inducing.py --datasets kin40k --num-inducing 500 --name fit_inducing_kin40k_m500
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "perf"))  # common.py
from common import STUDY_RESULTS, machine, write  # noqa: E402

from onlinegp.experiments.protocols import WGPR_INIT_LENGTHSCALE, load_stream, split_data  # noqa: E402
from onlinegp.metrics import nlpd, rmse  # noqa: E402
from onlinegp.models.registry import make_model  # noqa: E402

#: mode -> (fit_inducing, old_noise) of OSGPR
MODES = {
    "selected": ("selected", "fixed"),
    "union": ("union", "fixed"),
    "selected+current": ("selected", "current"),
    "union+current": ("union", "current"),
}


def load(name: str, train: int, test: int, seed: int) -> tuple[np.ndarray, ...]:
    if name == "bathymetry":  # the WGPR bench's stream, with its settings (50 inducing inputs, its start)
        tr, te = load_stream(name, None, test, seed)
        return tr.X[:train], tr.y[:train], te.X, te.y
    return split_data(name, seed, train, test)


def model_options(name: str, X: np.ndarray, y: np.ndarray, num_inducing: int, seed: int) -> dict:
    if name == "bathymetry":
        return {
            "num_inducing": 50,
            "kernel_options": {"lengthscale": WGPR_INIT_LENGTHSCALE * math.sqrt(X.shape[1])},
            "x_bounds": np.stack([X.min(0), X.max(0)]).tolist(),
            "y_stats": (float(y.mean()), float(y.std())),
            "seed": seed,
        }
    return {"num_inducing": num_inducing, "seed": seed}


def run(name: str, train: int, test: int, batch: int, num_inducing: int, seed: int, modes: list[str]) -> dict:
    X, y, Xt, yt = load(name, train, test, seed)
    options = model_options(name, X, y, num_inducing, seed)
    models = {
        m: make_model("osgpr", X.shape[1], fit_inducing=MODES[m][0], old_noise=MODES[m][1], **options) for m in modes
    }
    seconds = dict.fromkeys(modes, 0.0)
    curves: dict[str, list[float]] = {m: [] for m in modes}
    for idx in np.array_split(np.arange(len(X)), max(len(X) // batch, 1)):
        for mode, model in models.items():
            start = time.perf_counter()
            model.update(X[idx], y[idx])
            seconds[mode] += time.perf_counter() - start
            curves[mode].append(rmse(yt, model.predict(Xt).mean))
    out = {"dataset": name, "inputs": X.shape[1], "train": len(X), "num_inducing": options["num_inducing"]}
    for mode, model in models.items():
        pred = model.predict(Xt)
        out[mode] = {
            "rmse": rmse(yt, pred.mean),
            "nlpd": nlpd(yt, pred.mean, pred.variance),
            "max_rmse": max(curves[mode]),
            "update_seconds": seconds[mode],
            "noise": float(model.noise.detach()),
            "rmse_curve": curves[mode],
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="concrete,elevators,kin40k,protein,skillcraft,bathymetry")
    parser.add_argument("--train", type=int, default=2000)
    parser.add_argument("--test", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--num-inducing", type=int, default=200, help="M for the UCI sets (bathymetry: 50)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--modes", default=",".join(MODES), help=f"a subset of {', '.join(MODES)}")
    parser.add_argument("--name", default="fit_inducing")
    args = parser.parse_args()
    modes = args.modes.split(",")
    if unknown := set(modes) - set(MODES):
        parser.error(f"unknown modes {sorted(unknown)}")
    rows = []
    for name in args.datasets.split(","):
        row = run(name, args.train, args.test, args.batch, args.num_inducing, args.seed, modes)
        rows.append(row)
        print(
            f"{name:12s} D={row['inputs']:2d} "
            + "  ".join(
                f"{m}: RMSE {row[m]['rmse']:.4g} (max {row[m]['max_rmse']:.4g}) NLPD {row[m]['nlpd']:.3f} "
                f"{row[m]['update_seconds']:.0f} s"
                for m in modes
            ),
            flush=True,
        )
    write(args.name, {"machine": machine(), "args": vars(args), "rows": rows}, STUDY_RESULTS)


if __name__ == "__main__":
    main()
