"""One L-BFGS fit of a WGPR member (OSGPR of Bui et al. 2017 with the WGPR bench's kin40k settings: RBF-ARD, M = 50,
pseudo-inputs moved with θ, θ at Z' and the dropped inputs, the old data at the current noise, batches of 100): the
bound with its closed-form gradient (:class:`onlinegp.objectives.StatisticsFit`: one kernel matrix, one autograd node)
against the plain one (autograd through :func:`onlinegp.objectives.statistics_bound`, what every evaluation did
before), in one run; and, since 0.7.2 evaluates the RBF kernel as one autograd node
(:func:`onlinegp.kernels.rbf.scaled_rbf`), StatisticsFit with the kernel matrix from gpytorch (``kernel``: 0.7.1's
kernel call). Every WGPR candidate and fresh member, every SOLAR-GP member and OVFE fit so.

For each timed batch all paths start from the same member state and absorb the same batch (order rotated, so
load drifts hit each). The time per bound evaluation is the measure: over a whole budget of about 200 evaluations
round-off parts the L-BFGS paths, so the evaluations per fit and the bounds reached are reported, not compared
to round-off (tests/library/test_fast_paths.py checks values and gradients, and a short fit's θ, to round-off).

    OMP_NUM_THREADS=1 python benchmarks/perf/bench_member_fit.py [--batches 8] [--points 2000]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median, timed_cpu, write  # noqa: E402

import onlinegp.models.osgpr as osgpr  # noqa: E402
import onlinegp.objectives as objectives  # noqa: E402
from onlinegp.experiments.protocols import load_stream, wgpr_model  # noqa: E402
from onlinegp.objectives import statistics_bound  # noqa: E402


class PlainBound:
    """The bound as ``OSGPR._fit`` evaluated it before StatisticsFit: autograd through statistics_bound."""

    def __init__(self, kernel, X, y, old, jitter_log):
        self.args = kernel, X, y, old, jitter_log

    def __call__(self, noise, Z):
        kernel, X, y, old, jitter_log = self.args
        return statistics_bound(kernel, noise, Z, X, y, old, jitter_log).value


@contextlib.contextmanager
def plain_bound():
    fast = osgpr.StatisticsFit
    osgpr.StatisticsFit = PlainBound
    try:
        yield
    finally:
        osgpr.StatisticsFit = fast


@contextlib.contextmanager
def gpytorch_kernel():
    """StatisticsFit with the kernel matrix evaluated by gpytorch (0.7.1's kernel call) instead of ``scaled_rbf``."""
    fused = objectives.rbf_parameters
    objectives.rbf_parameters = lambda kernel: None
    try:
        yield
    finally:
        objectives.rbf_parameters = fused


#: the paths timed: autograd through statistics_bound, StatisticsFit with gpytorch's kernel, StatisticsFit
PATHS = {"plain": plain_bound, "kernel": gpytorch_kernel, "fast": contextlib.nullcontext}


def run(batches: int = 8, points: int = 2000, warm: int = 3, seed: int = 0) -> dict:
    """``warm`` batches absorbed first (the member's M reaches its cap of 50), then ``batches`` timed ones."""
    load_before = os.getloadavg()[0]
    train, _ = load_stream("kin40k", points, 100, seed)
    x_bounds = np.stack([train.X.min(0), train.X.max(0)])
    member = wgpr_model(
        "ovfe",
        train.input_dim,
        {},
        x_bounds,
        (float(train.y.mean()), float(train.y.std())),
        seed,
        None,
        optimize_inducing=True,
    )
    X, y = train.X, train.y
    for b in range(warm):
        member.update(X[b * 100 : (b + 1) * 100], y[b * 100 : (b + 1) * 100])
    rows = []
    for e in range(batches):
        lo = (warm + e) * 100
        start, results = member, {}
        names = list(PATHS)
        for name in names[e % 3 :] + names[: e % 3]:  # the order rotated, so load drifts hit every path
            model = copy.deepcopy(start)
            with PATHS[name]():
                results[name] = (*timed_cpu(lambda: model.update(X[lo : lo + 100], y[lo : lo + 100])), model)
        row = {"batch": warm + e}
        for name, (t, c, report, _) in results.items():
            evaluations = report.extra["evaluations"]
            row |= {
                f"{name}_s": t,
                f"{name}_cpu_s": c,
                f"{name}_evaluations": evaluations,
                f"{name}_ms_per_evaluation": 1000 * report.timings["hyperparameters"] / evaluations,
                f"{name}_objective": report.objective,
            }
        rows.append(row)
        member = results["fast"][3]
        print(
            f"batch {row['batch']}: plain {row['plain_ms_per_evaluation']:.2f} ms/evaluation"
            f" ({row['plain_evaluations']}), gpytorch kernel {row['kernel_ms_per_evaluation']:.2f} ms"
            f" ({row['kernel_evaluations']}), fast {row['fast_ms_per_evaluation']:.2f} ms ({row['fast_evaluations']})"
            f", bound {row['plain_objective']:.3f} vs {row['fast_objective']:.3f}",
            flush=True,
        )
    summary = {
        key: median([r[key] for r in rows])
        for key in (f"{name}_{what}" for what in ("ms_per_evaluation", "cpu_s", "evaluations") for name in PATHS)
    }
    summary["ratio_per_evaluation"] = summary["plain_ms_per_evaluation"] / summary["fast_ms_per_evaluation"]
    summary["kernel_ratio_per_evaluation"] = summary["kernel_ms_per_evaluation"] / summary["fast_ms_per_evaluation"]
    summary["ratio_per_evaluation_each_batch"] = [
        r["plain_ms_per_evaluation"] / r["fast_ms_per_evaluation"] for r in rows
    ]
    config = {
        "batches": batches,
        "points": points,
        "warm": warm,
        "seed": seed,
        "batch": 100,
        "num_inducing": 50,
        "member": {
            k: v if isinstance(v, (int, float, str, bool, type(None))) else repr(v) for k, v in member.options().items()
        },
        "threads": torch.get_num_threads(),
        "loadavg_before": load_before,
    }
    return {"config": config, "summary": summary, "batches": rows}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--points", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the WGPR bench)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    out = run(batches=args.batches, points=args.points)
    out["config"]["loadavg_after"] = os.getloadavg()[0]
    path = write("bench_member_fit", out)
    print({k: v for k, v in out["summary"].items()}, "->", path)
    return out


if __name__ == "__main__":
    main()
