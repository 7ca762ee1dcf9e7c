"""What limits the streaming sparse GPs on a dataset: the model size M, or fitting θ batch by batch?

On the ``onlinegp bench defaults`` protocol (split 0: seeded shuffle, standardised with the training statistics,
2000 training points streamed in batches of 100, 1000 test points), three fits of the same data:

* the exact GP (ARD RBF, θ by L-BFGS on all points: the table's reference);
* OSGPR streamed with θ **frozen at the exact GP's** (no hyper-parameter steps), for each M in ``--sizes``: what
  an M-point streaming model could do if θ were right; with M = N it must equal the exact GP (a check);
* the batch sparse GP (OSGPR's defaults, all points as one batch: the table's ``sgpr`` reference).

    OMP_NUM_THREADS=1 python benchmarks/studies/study_sparse_budget.py --datasets kin40k,pumadyn32nm --sizes 500,1000,2000

Writes ``benchmarks/studies/results/sparse_budget.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "perf"))  # common.py, paper_code.py
from common import STUDY_RESULTS, write  # noqa: E402

from onlinegp import make_model  # noqa: E402
from onlinegp.experiments.protocols import lbfgs_exact_gp, scores, split_data  # noqa: E402


def study(dataset: str, sizes: list[int], batch: int = 100) -> dict:
    X, y, X_test, y_test = split_data(dataset, 0, 2000, 1000)
    fixed = {"x_bounds": np.stack([X.min(0), X.max(0)]), "y_stats": (0.0, 1.0)}
    exact = make_model("exact", num_steps=0, max_data=10**9, **fixed)
    lbfgs_exact_gp(exact, X, y, max_iter=100)
    out = {"exact": scores(y_test, exact.predict(X_test))}
    for size in sizes:
        model = make_model("osgpr", num_steps=0, num_inducing=size, **fixed)
        model.update(X[:1], y[:1])  # builds the kernel; then θ := the exact GP's, and the stream starts over
        model.kernel.load_state_dict(exact.kernel.state_dict())
        model.likelihood.load_state_dict(exact.likelihood.state_dict())
        stream = make_model("osgpr", num_steps=0, num_inducing=size, **fixed)
        stream.kernel, stream.likelihood = model.kernel, model.likelihood
        t0 = time.perf_counter()
        for start in range(0, len(X), batch):
            stream.update(X[start : start + batch], y[start : start + batch])
        row = scores(y_test, stream.predict(X_test)) | {"num_inducing": stream.num_inducing}
        out[f"stream_exact_theta_M{size}"] = row | {"seconds": time.perf_counter() - t0}
    batch_sgpr = make_model("osgpr", **fixed)
    batch_sgpr.update(X, y)
    out["batch_sgpr_M500"] = scores(y_test, batch_sgpr.predict(X_test)) | {"num_inducing": batch_sgpr.num_inducing}
    for name, row in out.items():
        row["rmse_ratio"] = row["rmse"] / out["exact"]["rmse"]
        print(f"{dataset:12s} {name:28s} RMSE {row['rmse']:.3f} ({row['rmse_ratio']:.2f}x)  NLPD {row['nlpd']:+.2f}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="kin40k,pumadyn32nm")
    parser.add_argument("--sizes", default="500,1000,2000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    result = {d: study(d, sizes) for d in args.datasets.split(",")}
    print(f"wrote {write('sparse_budget', {'sizes': sizes, 'datasets': result}, STUDY_RESULTS)}")


if __name__ == "__main__":
    main()
