"""Where WGPR's members drop pseudo-inputs, and what fitting θ with only the uncovered ones costs (0.7.6).

Two measurements behind ``OSGPR(fit_inducing='distant')``, WGPR's members' default since 0.7.6:

* ``cover``: for every member fit that drops old inducing inputs, the largest kernel correlation
  k(d, x) / √(k(d, d) k(x, x)) of each dropped input d with the batch, averaged over the dropped inputs, under θ before
  the fit; quantiles over the fits, on the defaults check's stream of bike and skillcraft (split 0,
  ``make_model('wgpr')``) and the WGPR bench's lake stand-in (trial 0, its first 5000 points);
* ``evaluations``: L-BFGS evaluations per member fit on the WGPR bench's kin40k stream (trial 0, its first 3000
  points) with the members' fit at 'union' (0.7.3-0.7.5) and at 'distant', with the run's RMSE and members.

    OMP_NUM_THREADS=1 python benchmarks/studies/study_wgpr_distant.py

writes ``benchmarks/studies/results/study_wgpr_distant.json``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "perf"))
from common import STUDY_RESULTS, write  # noqa: E402

from onlinegp.experiments.bench.runner import code_version  # noqa: E402
from onlinegp.experiments.protocols import WGPR_SETTINGS, split_data, wgpr_run  # noqa: E402
from onlinegp.models import osgpr  # noqa: E402
from onlinegp.models.registry import make_model  # noqa: E402

QUANTILES = (0.1, 0.5, 0.9)


def bench_stream(dataset: str, max_points: int, member_options: dict | None = None) -> dict:
    """The WGPR bench's job on the first ``max_points`` of ``dataset``, trial 0."""
    config = {
        "max_points": max_points,
        "max_test": 2000,
        "batch_size": 100,
        "member_steps": None,
        "optimize_inducing": True,
        "seed": 0,
        "dataset": dataset,
        "method": "wgpr",
        "params": dict(WGPR_SETTINGS[dataset]["wgpr"]),
        **({"member_options": member_options} if member_options else {}),
    }
    with tempfile.TemporaryDirectory() as scratch:
        return wgpr_run(config, Path(scratch))


def cover(dataset: str) -> list[float]:
    """Per member fit that drops inputs: the dropped inputs' mean largest correlation with the batch."""
    seen: list[float] = []
    fit = osgpr.OSGPR._fit

    def recording(self, Z, xs, ys, old, data=None, union=False):
        dropped = self._dropped(Z, old)
        if dropped is not None:
            with torch.no_grad():
                cross = self.kernel(dropped, xs).to_dense()
                scale = (self.kernel(dropped, diag=True)[:, None] * self.kernel(xs, diag=True)[None, :]).sqrt()
                seen.append(float((cross / scale).max(1).values.mean()))
        return fit(self, Z, xs, ys, old, data, union)

    osgpr.OSGPR._fit = recording
    try:
        if dataset == "bathymetry":
            bench_stream(dataset, 5000)
        else:
            X, y, _, _ = split_data(dataset, 0, 2000, 1000)
            model = make_model("wgpr", seed=0)
            for start in range(0, len(X), 100):
                model.update(X[start : start + 100], y[start : start + 100])
    finally:
        osgpr.OSGPR._fit = fit
    return seen


def evaluations(fit_inducing: str) -> dict:
    """L-BFGS evaluations per member fit on kin40k's first 3000 bench points with the members' fit."""
    counts: list[int] = []
    lbfgs = osgpr.OSGPR._lbfgs

    def counting(self, params, loss):
        counts.append(lbfgs(self, params, loss))
        return counts[-1]

    osgpr.OSGPR._lbfgs = counting
    try:
        out = bench_stream("kin40k", 3000, {"fit_inducing": fit_inducing})
    finally:
        osgpr.OSGPR._lbfgs = lbfgs
    c = np.array(counts)
    return {
        "fits": len(c),
        "mean": float(c.mean()),
        "quantiles": dict(zip(map(str, QUANTILES), np.quantile(c, QUANTILES).tolist())),
        "rmse": out["rmse"],
        "num_models": out["num_models"],
        "train_time": out["train_time"],
    }


def main() -> None:
    torch.set_num_threads(1)
    result = {"code": code_version(), "cover": {}, "evaluations": {}}
    for dataset in ("bike", "skillcraft", "bathymetry"):
        seen = cover(dataset)
        result["cover"][dataset] = {
            "fits": len(seen),
            "quantiles": dict(zip(map(str, QUANTILES), np.quantile(seen, QUANTILES).tolist())),
        }
        print(dataset, result["cover"][dataset], flush=True)
    for fit_inducing in ("union", "distant"):
        result["evaluations"][fit_inducing] = evaluations(fit_inducing)
        print(fit_inducing, result["evaluations"][fit_inducing], flush=True)
    print(write("study_wgpr_distant", result, STUDY_RESULTS))


if __name__ == "__main__":
    main()
