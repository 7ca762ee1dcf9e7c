"""WISKI update time per observation against the number of points seen (DESIGN §5: constant time).

For each grid (2-D, m = 16² = 256; 3-D, m = 10³ = 1000) a model absorbs N points of a smooth synthetic field
(in chunks, with no hyper-parameter steps: the caches WᵀW, Wᵀy, yᵀy are then exactly what one-at-a-time updates
would have left, as tests/test_wiski.py checks), and then the next ``--points`` single observations are timed, each
with its one Adam step and the predictor refresh (the full per-observation work of Algorithm 1). The timed updates
of the different N are interleaved, so that load changes on a shared machine hit every N alike. Also reported:
the bytes of the model's checkpoint (memory independent of N) and prediction time for 2500 points.

    OMP_NUM_THREADS=1 python benchmarks/bench_wiski.py [--sizes 1000,20000] [--points 20] [--threads 1]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from onlinegp.models.wiski import WISKI

RESULTS = Path(__file__).resolve().parent / "results"


def field(X: torch.Tensor) -> torch.Tensor:
    return torch.sin(3 * X[:, 0]) * torch.cos(2 * X[:, 1 % X.shape[1]]) + 0.5 * X[:, -1] ** 2


def data(n: int, dim: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, dim, dtype=torch.float64, generator=g) * 2 - 1
    return X, field(X) + 0.1 * torch.randn(n, dtype=torch.float64, generator=g)


def checkpoint_bytes(model: WISKI) -> int:
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return buf.getbuffer().nbytes


def measure(dim: int, grid_size: int, sizes: list[int], points: int, seed: int = 0) -> list[dict]:
    """Models at every N in ``sizes``; their timed single-point updates are interleaved (one each in turn), so a
    change in machine load during the run affects every N alike."""
    models, streams = [], []
    for n in sizes:
        X, y = data(n + points, dim, seed)
        model = WISKI(dim, grid_size=grid_size, num_steps=0, x_bounds=[[-1.0] * dim, [1.0] * dim], seed=seed)
        for i in range(0, n, 2000):
            model.update(X[i : min(i + 2000, n)], y[i : min(i + 2000, n)])
        model.num_steps = 1
        models.append(model)
        streams.append((X[n:], y[n:]))
    times = [[] for _ in sizes]
    phases = [[] for _ in sizes]
    for p in range(points):
        for k, (model, (X, y)) in enumerate(zip(models, streams)):
            t0 = time.perf_counter()
            report = model.update(X[p : p + 1], y[p : p + 1])
            times[k].append(time.perf_counter() - t0)
            phases[k].append(report.timings)
    Xt, _ = data(2500, dim, seed + 1)
    rows = []
    for k, (n, model) in enumerate(zip(sizes, models)):
        t0 = time.perf_counter()
        model.predict(Xt)
        predict = time.perf_counter() - t0
        rows.append(
            {
                "dim": dim,
                "m": model.num_inducing,
                "num_data": n,
                "update_median_s": statistics.median(times[k]),
                "update_min_s": min(times[k]),
                "update_max_s": max(times[k]),
                "phases_median_s": {key: statistics.median(ph[key] for ph in phases[k]) for key in phases[k][0]},
                "predict_2500_s": predict,
                "checkpoint_bytes": checkpoint_bytes(model),
            }
        )
    return rows


def main() -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,20000", help="comma-separated N")
    ap.add_argument("--points", type=int, default=20, help="single-point updates timed at each N")
    ap.add_argument("--grids", default="2:16,3:10", help="comma-separated dim:grid_size")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rows = []
    for spec in args.grids.split(","):
        dim, g = (int(v) for v in spec.split(":"))
        for row in measure(dim, g, [int(s) for s in args.sizes.split(",")], args.points):
            rows.append(row)
            n = row["num_data"]
            print(
                f"d={dim} m={row['m']:5d} N={n:6d}: update median {1e3 * row['update_median_s']:.1f} ms "
                f"(min {1e3 * row['update_min_s']:.1f}), predict 2500 {1e3 * row['predict_2500_s']:.1f} ms, "
                f"checkpoint {row['checkpoint_bytes'] / 1e6:.2f} MB",
                flush=True,
            )
    ratios = {}
    for dim in {r["dim"] for r in rows}:
        rs = sorted((r for r in rows if r["dim"] == dim), key=lambda r: r["num_data"])
        ratios[f"d{dim}_update_ratio_N{rs[-1]['num_data']}_over_N{rs[0]['num_data']}"] = (
            rs[-1]["update_median_s"] / rs[0]["update_median_s"]
        )
    print(json.dumps(ratios, indent=1))
    result = {
        "benchmark": "wiski",
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "load_average": list(os.getloadavg()),
        },
        "points_timed": args.points,
        "rows": rows,
        "ratios": ratios,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "wiski.json").write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
