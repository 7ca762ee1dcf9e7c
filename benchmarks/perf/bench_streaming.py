"""Update time per batch of streaming sparse GPs against POAM at equal M as the stream grows (DESIGN §5).

Each model absorbs a stream of batches (default 256 points) of a non-stationary 2-D field, Attentive Kernel,
float64, 10 optimiser steps per batch for every method (POAM: Adam on the uncollapsed ELBO over mini-batches of
all data; SSGP++: Adam on the online collapsed bound of the batch; O-SGPR: L-BFGS to convergence). Every batch is
timed (wall clock and CPU time of the process: on a shared machine the latter is the steadier measure of
work); the table reports the median update time of the batches whose stream position falls in each window, and
the checkpoint size (OSGPR keeps only its summary; POAM keeps its data buffer for the M-step by design).

    OMP_NUM_THREADS=1 python benchmarks/perf/bench_streaming.py [--sizes 200:50000,500:20000] [--methods poam,ssgp++]
    OMP_NUM_THREADS=1 python benchmarks/perf/bench_streaming.py --sizes 200:3000 --methods poam,ssgp++,osgpr,ssgp \
        --name streaming_lbfgs     # vanilla SSGP / O-SGPR: L-BFGS to convergence (up to 200 iterations) per batch
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from onlinegp.models.registry import make_model

RESULTS = Path(__file__).resolve().parent / "results"
WINDOWS = (1_000, 5_000, 10_000, 20_000, 50_000)
#: methods that optimise to convergence (their own default L-BFGS iteration cap) rather than ``--steps`` steps
LBFGS_METHODS = ("osgpr", "ssgp", "vips")


def field(X: torch.Tensor) -> torch.Tensor:
    """Smooth bump on one side, short-scale ripples on the other (non-stationary), inputs in [-1, 1]²."""
    smooth = torch.exp(-((X[:, 0] - 0.3) ** 2 + (X[:, 1] + 0.2) ** 2) / 0.25)
    ripples = 0.3 * torch.sin(9 * X[:, 0]) * torch.cos(7 * X[:, 1]) * torch.sigmoid(8 * X[:, 0])
    return smooth + ripples


def data(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, dtype=torch.float64, generator=g) * 2 - 1
    return X, field(X) + 0.05 * torch.randn(n, dtype=torch.float64, generator=g)


def checkpoint_bytes(model) -> int:
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return buf.getbuffer().nbytes


def run(method: str, M: int, n: int, batch: int, steps: int, kernel: str, seed: int = 0) -> dict:
    X, y = data(n, seed)
    lbfgs = method in LBFGS_METHODS
    model = make_model(
        method,
        2,
        num_inducing=M,
        num_steps=None if lbfgs else steps,
        kernel=kernel,
        x_bounds=[[-1.0, -1.0], [1.0, 1.0]],
        seed=seed,
    )
    seen, times, cpu, phases, sizes, inducing = [], [], [], [], {}, []
    for lo in range(0, n, batch):
        t0, c0 = time.perf_counter(), time.process_time()
        report = model.update(X[lo : lo + batch], y[lo : lo + batch])
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        seen.append(report.num_data)
        inducing.append(report.num_inducing)
        phases.append(report.timings)
        if any(report.num_data >= w > report.num_data - batch for w in WINDOWS):
            sizes[report.num_data] = checkpoint_bytes(model)
    Xt, yt = data(2500, seed + 1)
    t0 = time.perf_counter()
    pred = model.predict(Xt)
    predict_s = time.perf_counter() - t0
    windows = {}
    for w in WINDOWS:
        if w > n:
            continue
        sel = [i for i, s in enumerate(seen) if 0.8 * w < s <= w] or [max(i for i, s in enumerate(seen) if s <= w)]
        windows[w] = {
            "median_s": statistics.median(times[i] for i in sel),
            "batches": len(sel),
            "median_cpu_s": statistics.median(cpu[i] for i in sel),
            "num_inducing": statistics.median(inducing[i] for i in sel),
            "phases_s": {k: statistics.median(phases[i].get(k, 0.0) for i in sel) for k in phases[sel[0]]},
        }
    return {
        "method": method,
        "M": M,
        "n": n,
        "batch": batch,
        "steps": model.num_steps,
        "kernel": kernel,
        "windows": windows,
        "times_s": times,
        "cpu_s": cpu,
        "checkpoint_bytes": sizes,
        "predict_2500_s": predict_s,
        "rmse": float((pred.mean - yt).pow(2).mean().sqrt()),
        "total_s": sum(times),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="200:50000,500:20000", help="M:N pairs")
    ap.add_argument("--methods", default="poam,ssgp++")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--kernel", default="ak")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--name", default="streaming", help="results file benchmarks/perf/results/<name>.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    runs = []
    for pair in args.sizes.split(","):
        M, n = (int(v) for v in pair.split(":"))
        for method in args.methods.split(","):
            r = run(method, M, n, args.batch, args.steps, args.kernel)
            runs.append(r)
            cells = "  ".join(
                f"N≤{w}: {v['median_s'] * 1e3:6.0f} ms ({v['median_cpu_s'] * 1e3:5.0f} cpu, M={v['num_inducing']:.0f})"
                for w, v in r["windows"].items()
            )
            print(
                f"{method:8s} M={M:4d}  {cells}  | checkpoint {min(r['checkpoint_bytes'].values()) / 1e6:.2f}"
                f"-{max(r['checkpoint_bytes'].values()) / 1e6:.2f} MB  predict(2500) "
                f"{r['predict_2500_s'] * 1e3:.1f} ms  RMSE {r['rmse']:.3f}",
                flush=True,
            )
    out = {
        "benchmark": "streaming",
        "args": vars(args),
        "runs": runs,
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "load_average": list(os.getloadavg()),
        },
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{args.name}.json"
    path.write_text(json.dumps(out, indent=1, default=float))
    print(f"wrote {path}")
    for M in sorted({r["M"] for r in runs}):
        by = {r["method"]: r for r in runs if r["M"] == M}
        if "poam" in by:
            for method, r in by.items():
                if method != "poam":
                    common = sorted(set(r["windows"]) & set(by["poam"]["windows"]))
                    ratio = [r["windows"][w]["median_cpu_s"] / by["poam"]["windows"][w]["median_cpu_s"] for w in common]
                    print(
                        f"M={M}: {method} / poam update CPU time: "
                        + ", ".join(f"N≤{w}: {x:.1f}x" for w, x in zip(common, ratio) if math.isfinite(x))
                    )


if __name__ == "__main__":
    main()
