"""WISKI update time per observation against the number of points seen (DESIGN §5: constant time), for the Kronecker
grid algebra and the dense reference (``algebra='dense'``), against one dense m × m Cholesky on the same machine.

For each grid (2-D, m = 16² = 256; 3-D, m = 10³ = 1000) and algebra a model absorbs N points of a smooth synthetic
field (in chunks, with no hyper-parameter steps: the caches WᵀW, Wᵀy, yᵀy are then exactly what one-at-a-time updates
would have left, as tests/library/models/test_wiski.py checks), and then the next ``--points`` single observations are timed, each
with its one Adam step (the per-observation work of Algorithm 1; the prediction caches are rebuilt lazily, at the
next prediction, whose time is reported apart). The timed updates of every (algebra, N) and a Cholesky of a dense
m × m SPD matrix (torch's, MKL, the reference of the targets; and SciPy's LAPACK, OpenBLAS, which the Kronecker
algebra uses) are interleaved, so that load changes on a shared machine hit them alike, and the ratio update / Cholesky
is the machine-independent figure, in wall and in CPU time (the process's: one thread, so the work done, less
sensitive to other jobs than wall time). Also reported: the time per phase, the bytes of the model's checkpoint (memory
independent of N), the time of the first prediction at 2500 points after an update (cache rebuild included) and the
rank of WᵀW (a rank-r root of it, Stanton et al. 2021 §4.2, saves work only where r is well below m).

``--compare SRC`` also times the Kronecker algebra of another source tree (e.g. a copy of ``src`` from before a change,
``PYTHONPATH=SRC``) in a worker process driven update by update over JSON lines, interleaved with this tree's updates and
the Choleskies: rows with ``"tree": "compare"``, and the ratios compare / this. ``--grids 5:16`` times the learnt
projection (D = 5 inputs onto a 16² grid). Writes ``benchmarks/perf/results/wiski.json`` (``--out NAME``: NAME.json).

``--batch`` instead compares the Adam steps a batch of B points gets (:data:`RULES`: up to B, stopping once the
objective has settled, WISKI's default since 0.6.0; B, one per point as Algorithm 1 streams them, the default of 0.1.0 and
0.5.0; ⌈√B⌉, the default of 0.2.0-0.4.0; one per batch, the step count of the code of 2026-11-23 and of the authors'
``update``) on ``make_model("wiski")`` (2-D, m = 256, 200 pre-training steps on the first batch), the models of every
rule updated in turn, batch by batch, in one process: the seconds of a first batch of 200 and of batches of 1000 after
it (the smooth field above); the final RMSE and NLPD of 20 batches of 500 of the 2-D magnetic-field survey
(``onlinegp.experiments.bench.defaults.split_data``: a seeded shuffle, 1000 test points, standardised) against the exact GP (θ by
L-BFGS on the first ``--exact-fit`` points, then conditioned on all); and ``--stream-points`` of it in batches of
200-1000 points (seeded sizes). Writes ``benchmarks/perf/results/wiski-batch.json`` with the load averages.

    OMP_NUM_THREADS=1 python benchmarks/perf/bench_wiski.py [--sizes 1000,20000] [--points 20] [--threads 1]
        [--grids 2:16,3:10] [--algebras kronecker,dense] [--dense-sizes 1000] [--compare OLD_SRC]
    OMP_NUM_THREADS=1 python benchmarks/perf/bench_wiski.py --batch [--splits 3] [--stream-points 22000]
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from scipy.linalg import lapack

from onlinegp.experiments.bench.runner import code_version
from onlinegp.experiments.protocols import bounds_of, lbfgs_exact_gp, scores, split_data
from onlinegp.models.registry import make_model
from onlinegp.models.wiski import SETTLED, WISKI
from onlinegp.training import Pretraining, Training

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


class LocalRun:
    """A model that has absorbed ``num_data`` points (in chunks, no steps), and the next ``points`` to time."""

    def __init__(
        self,
        dim: int,
        grid_size: int,
        algebra: str,
        num_data: int,
        points: int,
        seed: int,
        wtw_rank: int | None = None,
        wtw_update: str = "gill",
    ):
        X, y = data(num_data + points, dim, seed)
        self.model = WISKI(
            dim,
            grid_size=grid_size,
            algebra=algebra,
            wtw_rank=wtw_rank,
            wtw_update=wtw_update,
            training=Training(steps=0, pretrain=Pretraining(steps=0)),
            x_bounds=[[-1.0] * dim, [1.0] * dim],
            seed=seed,
        )
        for i in range(0, num_data, 2000):
            self.model.update(X[i : min(i + 2000, num_data)], y[i : min(i + 2000, num_data)])
        self.model.num_steps = 1
        self.X, self.y, self.seed = X[num_data:], y[num_data:], seed

    def update(self, p: int) -> tuple[float, float, dict]:
        """Wall and CPU seconds and the phase timings of the p-th single-point update (one Adam step)."""
        t0, c0 = time.perf_counter(), time.process_time()
        report = self.model.update(self.X[p : p + 1], self.y[p : p + 1])
        return time.perf_counter() - t0, time.process_time() - c0, report.timings

    def finish(self) -> dict:
        """The first prediction of 2500 points after the updates (cache rebuild included), checkpoint bytes and the
        rank of WᵀW (a rank-r root of it, Stanton et al. 2021 §4.2, would only save work for r < m)."""
        Xt, _ = data(2500, self.model.input_dim, self.seed + 1)
        t0 = time.perf_counter()
        self.model.predict(Xt)
        return {
            "predict_2500_after_update_s": time.perf_counter() - t0,
            "checkpoint_bytes": checkpoint_bytes(self.model),
            "rank_WtW": int(
                torch.linalg.matrix_rank(self.model.WtW)
                if self.model.wtw_rank is None
                else self.model.wtw_root.shape[1]  # the columns kept of its root
            ),
            "m": self.model.num_inducing,
        }


class RemoteRun:
    """A :class:`LocalRun` in a worker process that imports another source tree (``--compare``)."""

    def __init__(self, worker: subprocess.Popen, **spec):
        self.worker = worker
        self.index = self.call("build", spec)

    def call(self, *command):
        self.worker.stdin.write(json.dumps(command) + "\n")
        self.worker.stdin.flush()
        return json.loads(self.worker.stdout.readline())

    def update(self, p: int) -> tuple[float, float, dict]:
        return tuple(self.call("update", self.index, p))

    def finish(self) -> dict:
        return self.call("finish", self.index)


def serve() -> None:
    """The ``--worker`` loop: LocalRuns built, updated and finished on JSON-line commands from stdin."""
    runs: list[LocalRun] = []
    for line in sys.stdin:
        command, *args = json.loads(line)
        if command == "build":
            runs.append(LocalRun(**args[0]))
            reply = len(runs) - 1
        elif command == "update":
            reply = runs[args[0]].update(args[1])
        else:
            reply = runs[args[0]].finish()
        print(json.dumps(reply), flush=True)


def measure(
    dim: int,
    grid_size: int,
    sizes: list[int],
    points: int,
    algebras: dict[str, list[int]],
    seed: int = 0,
    worker: subprocess.Popen | None = None,
) -> list[dict]:
    """Models at every (algebra, N) in ``algebras`` (and the Kronecker algebra of the ``worker``'s tree at every N);
    their timed single-point updates and dense m × m Choleskies (torch's, and SciPy's LAPACK, which the Kronecker
    algebra uses) are interleaved (one each in turn), so that a change in machine load affects them all alike."""
    runs = []
    for label, ns in algebras.items():
        algebra, *root = label.split(" ")  # "kronecker", or "kronecker r=256 truncate": a rank-r root of WᵀW
        wtw = {} if not root else {"wtw_rank": int(root[0][2:]), "wtw_update": root[1]}
        for n in (n for n in sizes if n in ns):
            spec = dict(dim=dim, grid_size=grid_size, algebra=algebra, num_data=n, points=points, seed=seed, **wtw)
            runs.append({"tree": "this", "algebra": label, "num_data": n, "run": LocalRun(**spec)})
            if worker is not None and algebra == "kronecker":
                runs.append({"tree": "compare", "algebra": algebra, "num_data": n, "run": RemoteRun(worker, **spec)})
    m = runs[0]["run"].model.num_inducing  # grid_size^dim, or grid_size² over a learnt projection for dim > 3
    M = torch.randn(m, m, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    spd = M @ M.mT + m * torch.eye(m, dtype=torch.float64)
    choleskies = {"torch": lambda: torch.linalg.cholesky(spd), "scipy": lambda: lapack.dpotrf(spd.numpy(), lower=1)}
    chol: dict[str, list[float]] = {name: [] for name in choleskies}
    chol_cpu: dict[str, list[float]] = {name: [] for name in choleskies}
    times: list[list[float]] = [[] for _ in runs]
    cpu: list[list[float]] = [[] for _ in runs]
    phases: list[list[dict]] = [[] for _ in runs]
    for p in range(points):
        for name, factorise in choleskies.items():
            t0, c0 = time.perf_counter(), time.process_time()
            factorise()
            chol[name].append(time.perf_counter() - t0)
            chol_cpu[name].append(time.process_time() - c0)
        for run, t, c, ph in zip(runs, times, cpu, phases):
            seconds, cpu_seconds, timings = run["run"].update(p)
            t.append(seconds)
            c.append(cpu_seconds)
            ph.append(timings)
    rows = []
    median = statistics.median
    for run, t, c, ph in zip(runs, times, cpu, phases):
        rows.append(
            {
                "dim": dim,
                "tree": run["tree"],
                "algebra": run["algebra"],
                "num_data": run["num_data"],
                "update_median_s": median(t),
                "update_min_s": min(t),
                "update_max_s": max(t),
                "update_cpu_median_s": median(c),
                "cholesky_median_s": median(chol["torch"]),
                "cholesky_cpu_median_s": median(chol_cpu["torch"]),
                "scipy_cholesky_median_s": median(chol["scipy"]),
                "update_over_cholesky": median(t) / median(chol["torch"]),
                "update_cpu_over_cholesky_cpu": median(c) / median(chol_cpu["torch"]),
                "phases_median_s": {key: median(q[key] for q in ph) for key in ph[0]},
                **run["run"].finish(),
            }
        )
    return rows


#: ``--batch``'s step rules: the Adam steps of a batch of B points after the first (None: WISKI's default, one per
#: point, B)
#: name: (steps for a batch of B, None: B; training.tolerance, None: WISKI's default)
RULES = {
    "settled (default)": (None, None),
    "per point": (None, 0.0),
    "root": (lambda b: math.ceil(math.sqrt(b)), None),
    "one per batch": (lambda b: 1, None),
}


def stream_rules(
    X: np.ndarray, y: np.ndarray, sizes: list[int], seed: int, test: tuple[np.ndarray, np.ndarray] | None = None
) -> dict[str, dict]:
    """``make_model("wiski")`` under every rule of :data:`RULES`, fed (X, y) in batches of ``sizes``, the models
    updated in turn batch by batch: each rule's seconds per batch, the Adam steps after the first batch (its online
    optimiser's count) and, with ``test``, its final scores."""
    models = {
        name: make_model("wiski", seed=seed, training=Training(tolerance=tolerance))
        for name, (_, tolerance) in RULES.items()
    }
    seconds: dict[str, list[float]] = {name: [] for name in RULES}
    start = 0
    for b in sizes:
        for name, model in models.items():
            rule = RULES[name][0]
            model.num_steps = None if rule is None else rule(b)
            t0 = time.perf_counter()
            model.update(X[start : start + b], y[start : start + b])
            seconds[name].append(time.perf_counter() - t0)
        start += b
    out = {}
    for name, model in models.items():
        steps = max((int(state["step"]) for state in model.optimizer.state.values()), default=0)
        out[name] = {"seconds": seconds[name], "online_steps": steps, "update_s": sum(seconds[name])}
        if test is not None:
            out[name] |= scores(test[1], model.predict(test[0]))
    return out


def exact_reference(X: np.ndarray, y: np.ndarray, X_test: np.ndarray, y_test: np.ndarray, fit_points: int) -> dict:
    """The exact GP's scores: θ and σ² by L-BFGS on the first ``fit_points`` points, then conditioned on all."""
    gp = make_model("exact", num_steps=0, max_data=len(X), x_bounds=bounds_of(X), y_stats=(0.0, 1.0))
    lbfgs_exact_gp(gp, X[:fit_points], y[:fit_points])
    gp.update(X[fit_points:], y[fit_points:])
    return scores(y_test, gp.predict(X_test))


def batch_study(args: argparse.Namespace) -> dict:
    """``--batch``: timing, accuracy and a long stream of the step rules (module docstring)."""
    result: dict = {
        "benchmark": "wiski-batch",
        "code": code_version(),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "torch": torch.__version__},
        "torch_threads": torch.get_num_threads(),
        "rules": {
            "settled (default)": f"up to B, stopping once settled (tolerance {SETTLED:g})",
            "per point": "B",
            "root": "ceil(sqrt(B))",
            "one per batch": "1",
        },
    }

    def loads() -> list[float]:
        return [round(v, 2) for v in os.getloadavg()]

    load = loads()
    X, y = data(200 + args.repeats * 1000, 2, 0)
    runs = stream_rules(X, y, [200] + [1000] * args.repeats, 0)
    result["timing"] = {
        "load_average_start": load,
        "load_average_end": loads(),
        "first_batch": 200,
        "batch": 1000,
        "rules": {
            name: {
                "first_batch_s": r["seconds"][0],
                "batch_s": r["seconds"][1:],
                "batch_median_s": statistics.median(r["seconds"][1:]),
            }
            for name, r in runs.items()
        },
    }
    timing = result["timing"]["rules"]
    for name, r in timing.items():
        print(
            f"[timing] {name:13s}: first batch of 200 {r['first_batch_s']:.2f} s, batches of 1000 median "
            f"{r['batch_median_s']:.3f} s {[round(t, 3) for t in r['batch_s']]}",
            flush=True,
        )
    result["timing"]["per_point_over_settled"] = (
        timing["per point"]["batch_median_s"] / timing["settled (default)"]["batch_median_s"]
    )

    result["accuracy"] = {"dataset": args.dataset, "batches": 20, "batch": 500, "splits": []}
    for split in range(args.splits):
        load = loads()
        X, y, Xt, yt = split_data(args.dataset, split, 20 * 500, 1000)
        row = {"split": split, "load_average_start": load, "exact": exact_reference(X, y, Xt, yt, args.exact_fit)}
        row |= {"rules": stream_rules(X, y, [500] * 20, split, (Xt, yt)), "load_average_end": loads()}
        result["accuracy"]["splits"].append(row)
        print(
            f"[accuracy] split {split}: exact RMSE {row['exact']['rmse']:.4f} NLPD {row['exact']['nlpd']:.3f}; "
            + "; ".join(
                f"{n} RMSE {r['rmse']:.4f} NLPD {r['nlpd']:.3f} ({r['update_s']:.0f} s)"
                for n, r in row["rules"].items()
            ),
            flush=True,
        )

    load = loads()
    X, y, Xt, yt = split_data(args.dataset, 0, args.stream_points, 1000)
    sizes: list[int] = []
    for b in np.random.default_rng(0).integers(200, 1001, size=len(X)):
        sizes.append(int(min(b, len(X) - sum(sizes))))
        if sum(sizes) == len(X):
            break
    runs = stream_rules(X, y, sizes, 0, (Xt, yt))
    for r in runs.values():
        del r["seconds"]
    result["stream"] = {
        "points": len(X),
        "batches": len(sizes),
        "load_average_start": load,
        "load_average_end": loads(),
        "rules": runs,
    }
    for name, r in runs.items():
        print(
            f"[stream] {name:13s}: {len(X)} points in {len(sizes)} batches, {r['update_s']:.1f} s, "
            f"RMSE {r['rmse']:.4f} NLPD {r['nlpd']:.3f}",
            flush=True,
        )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "wiski-batch.json").write_text(json.dumps(result, indent=2))
    return result


def main() -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,20000", help="comma-separated N")
    ap.add_argument("--points", type=int, default=20, help="single-point updates timed at each N")
    ap.add_argument("--grids", default="2:16,3:10", help="comma-separated dim:grid_size")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--algebras", default="kronecker,dense", help="comma-separated WISKI algebras")
    ap.add_argument("--dense-sizes", default="1000", help="the N at which the (slow) dense algebra is timed")
    ap.add_argument("--compare", default=None, help="another source tree (e.g. a copy of src before a change)")
    ap.add_argument(
        "--wtw-ranks", default="", help="comma-separated r: also the Kronecker algebra with a rank-r root of WᵀW"
    )
    ap.add_argument("--wtw-updates", default="gill,truncate", help="the root updates timed with --wtw-ranks")
    ap.add_argument("--out", default="wiski", help="the result's name: benchmarks/perf/results/OUT.json")
    ap.add_argument("--batch", action="store_true", help="compare the step rules of a batch (module docstring)")
    ap.add_argument("--repeats", type=int, default=3, help="--batch: timed batches of 1000 per rule")
    ap.add_argument("--splits", type=int, default=3, help="--batch: splits of the accuracy streams")
    ap.add_argument("--dataset", default="magnetic", help="--batch: the 2-D dataset of the accuracy streams")
    ap.add_argument("--exact-fit", type=int, default=2000, help="--batch: points the exact GP's θ is fitted on")
    ap.add_argument("--stream-points", type=int, default=22000, help="--batch: points of the long stream")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.worker:
        serve()
        return {}
    if args.batch:
        return batch_study(args)
    load_start = list(os.getloadavg())
    sizes = [int(s) for s in args.sizes.split(",")]
    dense_sizes = [int(s) for s in args.dense_sizes.split(",")]
    algebras = {a: dense_sizes if a == "dense" else sizes for a in args.algebras.split(",")}
    for r in filter(None, args.wtw_ranks.split(",")):
        algebras |= {f"kronecker r={int(r)} {update}": sizes for update in args.wtw_updates.split(",")}
    worker = None
    if args.compare is not None:
        worker = subprocess.Popen(
            [sys.executable, __file__, "--worker", "--threads", str(args.threads)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(args.compare).resolve())},
        )
    rows = []
    for spec in args.grids.split(","):
        dim, g = (int(v) for v in spec.split(":"))
        for row in measure(dim, g, sorted(set(sizes) | set(dense_sizes)), args.points, algebras, worker=worker):
            rows.append(row)
            print(
                f"d={dim} m={row['m']:5d} {row['tree']:7s} {row['algebra']:9s} N={row['num_data']:6d}: update median "
                f"{1e3 * row['update_median_s']:.1f} ms (min {1e3 * row['update_min_s']:.1f}) = "
                f"{row['update_over_cholesky']:.1f} x Cholesky (torch {1e3 * row['cholesky_median_s']:.1f} ms, "
                f"SciPy {1e3 * row['scipy_cholesky_median_s']:.1f} ms); CPU {1e3 * row['update_cpu_median_s']:.1f} ms "
                f"= {row['update_cpu_over_cholesky_cpu']:.1f} x Cholesky; phases "
                + ", ".join(f"{k} {1e3 * v:.1f}" for k, v in row["phases_median_s"].items())
                + f"; predict 2500 after an update {1e3 * row['predict_2500_after_update_s']:.1f} ms, "
                f"checkpoint {row['checkpoint_bytes'] / 1e6:.2f} MB, rank(WtW) {row['rank_WtW']}",
                flush=True,
            )
    if worker is not None:
        worker.stdin.close()
        worker.wait()
    ratios = {}
    for dim in sorted({r["dim"] for r in rows}):
        this = [r for r in rows if r["dim"] == dim and r["tree"] == "this"]
        for algebra in algebras:
            rs = sorted((r for r in this if r["algebra"] == algebra), key=lambda r: r["num_data"])
            if len(rs) > 1:
                ratios[f"d{dim}_{algebra}_update_ratio_N{rs[-1]['num_data']}_over_N{rs[0]['num_data']}"] = (
                    rs[-1]["update_median_s"] / rs[0]["update_median_s"]
                )
        same = {r["algebra"]: r for r in this if r["num_data"] == dense_sizes[0]}
        if {"kronecker", "dense"} <= set(same):
            ratios[f"d{dim}_dense_over_kronecker_N{dense_sizes[0]}"] = (
                same["dense"]["update_median_s"] / same["kronecker"]["update_median_s"]
            )
        for old in (r for r in rows if r["dim"] == dim and r["tree"] == "compare"):
            new = next(r for r in this if r["algebra"] == old["algebra"] and r["num_data"] == old["num_data"])
            ratios[f"d{dim}_compare_over_this_N{old['num_data']}"] = old["update_median_s"] / new["update_median_s"]
            ratios[f"d{dim}_compare_over_this_cpu_N{old['num_data']}"] = (
                old["update_cpu_median_s"] / new["update_cpu_median_s"]
            )
    print(json.dumps(ratios, indent=1))
    result = {
        "benchmark": "wiski",
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
            "load_average_start": load_start,
            "load_average": list(os.getloadavg()),
        },
        "compare": args.compare,
        "points_timed": args.points,
        "rows": rows,
        "ratios": ratios,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps({**result, "benchmark": args.out}, indent=2))
    return result


if __name__ == "__main__":
    main()
