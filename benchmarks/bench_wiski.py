"""WISKI update time per observation against the number of points seen (DESIGN §5: constant time), for the Kronecker
grid algebra and the dense reference (``algebra='dense'``), against one dense m × m Cholesky on the same machine.

For each grid (2-D, m = 16² = 256; 3-D, m = 10³ = 1000) and algebra a model absorbs N points of a smooth synthetic
field (in chunks, with no hyper-parameter steps: the caches WᵀW, Wᵀy, yᵀy are then exactly what one-at-a-time updates
would have left, as tests/test_wiski.py checks), and then the next ``--points`` single observations are timed, each
with its one Adam step (the per-observation work of Algorithm 1; the prediction caches are rebuilt lazily, at the
next prediction, whose time is reported apart). The timed updates of every (algebra, N) and a Cholesky of a dense
m × m SPD matrix are interleaved, so that load changes on a shared machine hit them alike, and the ratio
update / Cholesky is the machine-independent figure. Also reported: the bytes of the model's checkpoint (memory
independent of N) and the time of the first prediction at 2500 points after an update (cache rebuild included).

    OMP_NUM_THREADS=1 python benchmarks/bench_wiski.py [--sizes 1000,20000] [--points 20] [--threads 1]
        [--algebras kronecker,dense] [--dense-sizes 1000]
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


def measure(
    dim: int, grid_size: int, sizes: list[int], points: int, algebras: dict[str, list[int]], seed: int = 0
) -> list[dict]:
    """Models at every (algebra, N) in ``algebras``; their timed single-point updates and a dense m × m Cholesky are
    interleaved (one each in turn), so that a change in machine load affects them all alike."""
    runs = []
    for algebra, ns in algebras.items():
        for n in (n for n in sizes if n in ns):
            X, y = data(n + points, dim, seed)
            model = WISKI(
                dim,
                grid_size=grid_size,
                algebra=algebra,
                num_steps=0,
                pretrain_steps=0,
                x_bounds=[[-1.0] * dim, [1.0] * dim],
                seed=seed,
            )
            for i in range(0, n, 2000):
                model.update(X[i : min(i + 2000, n)], y[i : min(i + 2000, n)])
            model.num_steps = 1
            runs.append({"algebra": algebra, "num_data": n, "model": model, "X": X[n:], "y": y[n:], "t": [], "ph": []})
    m = grid_size**dim
    M = torch.randn(m, m, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    spd = M @ M.mT + m * torch.eye(m, dtype=torch.float64)
    chol = []
    for p in range(points):
        t0 = time.perf_counter()
        torch.linalg.cholesky(spd)
        chol.append(time.perf_counter() - t0)
        for run in runs:
            t0 = time.perf_counter()
            report = run["model"].update(run["X"][p : p + 1], run["y"][p : p + 1])
            run["t"].append(time.perf_counter() - t0)
            run["ph"].append(report.timings)
    Xt, _ = data(2500, dim, seed + 1)
    rows = []
    chol_median = statistics.median(chol)
    for run in runs:
        model = run["model"]
        t0 = time.perf_counter()
        model.predict(Xt)
        predict = time.perf_counter() - t0
        times = run["t"]
        rows.append(
            {
                "dim": dim,
                "m": model.num_inducing,
                "algebra": run["algebra"],
                "num_data": run["num_data"],
                "update_median_s": statistics.median(times),
                "update_min_s": min(times),
                "update_max_s": max(times),
                "cholesky_median_s": chol_median,
                "update_over_cholesky": statistics.median(times) / chol_median,
                "phases_median_s": {key: statistics.median(ph[key] for ph in run["ph"]) for key in run["ph"][0]},
                "predict_2500_after_update_s": predict,
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
    ap.add_argument("--algebras", default="kronecker,dense", help="comma-separated WISKI algebras")
    ap.add_argument("--dense-sizes", default="1000", help="the N at which the (slow) dense algebra is timed")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    sizes = [int(s) for s in args.sizes.split(",")]
    dense_sizes = [int(s) for s in args.dense_sizes.split(",")]
    algebras = {a: dense_sizes if a == "dense" else sizes for a in args.algebras.split(",")}
    rows = []
    for spec in args.grids.split(","):
        dim, g = (int(v) for v in spec.split(":"))
        for row in measure(dim, g, sorted(set(sizes) | set(dense_sizes)), args.points, algebras):
            rows.append(row)
            print(
                f"d={dim} m={row['m']:5d} {row['algebra']:9s} N={row['num_data']:6d}: update median "
                f"{1e3 * row['update_median_s']:.1f} ms (min {1e3 * row['update_min_s']:.1f}) = "
                f"{row['update_over_cholesky']:.1f} x Cholesky ({1e3 * row['cholesky_median_s']:.1f} ms), "
                f"predict 2500 after an update {1e3 * row['predict_2500_after_update_s']:.1f} ms, "
                f"checkpoint {row['checkpoint_bytes'] / 1e6:.2f} MB",
                flush=True,
            )
    ratios = {}
    for dim in sorted({r["dim"] for r in rows}):
        for algebra in algebras:
            rs = sorted((r for r in rows if r["dim"] == dim and r["algebra"] == algebra), key=lambda r: r["num_data"])
            if len(rs) > 1:
                ratios[f"d{dim}_{algebra}_update_ratio_N{rs[-1]['num_data']}_over_N{rs[0]['num_data']}"] = (
                    rs[-1]["update_median_s"] / rs[0]["update_median_s"]
                )
        same = {r["algebra"]: r for r in rows if r["dim"] == dim and r["num_data"] == dense_sizes[0]}
        if {"kronecker", "dense"} <= set(same):
            ratios[f"d{dim}_dense_over_kronecker_N{dense_sizes[0]}"] = (
                same["dense"]["update_median_s"] / same["kronecker"]["update_median_s"]
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
