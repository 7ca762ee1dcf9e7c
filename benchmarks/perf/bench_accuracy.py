"""Accuracy before/after the speed work, and of float32: a fixed small streaming problem over 3 seeds.

Variants of POAM (Attentive Kernel, 10 Adam steps, batch 256) on the same stream (common.field, batches of 60):
``reference`` computes the way the code did before the speed work (AK as a per-length-scale autograd loop,
kernel matrices afresh every step, autograd through the Cholesky factor; see stock_gpytorch_poam.reference_path),
``fast`` is the library with the paper's exact M-step (``POAM(sketch=None)``), ``sketch`` the library's default
(the M-step on a sketch of q(u)'s covariance, ``POAM(sketch=64)``: an unbiased gradient), ``float32`` the fast
path in single precision. The fast path
is the same arithmetic reorganised, so its RMSE/NLPD should equal the reference's up to round-off amplified by Adam;
sketch and float32 should stay within the seed-to-seed noise. With ``--missions`` the chosen variants also run the
default mission for each seed (minutes each, ``--workers`` at a time) and compare final SMSE/MSLL
(``results/bench_accuracy_missions.json``).

    python benchmarks/perf/bench_accuracy.py [--seeds 0 1 2] [--missions] [--mission-variants fast sketch] [--workers 2]
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BOUNDS, grid, stream, timed_cpu, write  # noqa: E402
from stock_gpytorch_poam import reference_path  # noqa: E402

from onlinegp import POAM  # noqa: E402

EXACT = {"sketch": None}
VARIANTS = {
    "reference": (reference_path, torch.float64, EXACT),
    "fast": (contextlib.nullcontext, torch.float64, EXACT),
    "sketch": (contextlib.nullcontext, torch.float64, {"sketch": 64}),
    "float32": (contextlib.nullcontext, torch.float32, EXACT),
}


def streaming_run(variant: str, seed: int, n: int = 1500, batch: int = 60, num_inducing: int = 200) -> dict:
    context, dtype, options = VARIANTS[variant]
    X, y = stream(n, seed=100 + seed)
    Xt, ft = grid(40)
    with context():
        torch.manual_seed(seed)
        model = POAM(2, num_inducing=num_inducing, x_bounds=BOUNDS, seed=seed, dtype=dtype, **options)
        cpu = 0.0
        for lo in range(0, n, batch):
            _, c, _ = timed_cpu(lambda: model.update(X[lo : lo + batch].to(dtype), y[lo : lo + batch].to(dtype)))
            cpu += c
        pred = model.predict(Xt.to(dtype))
    mean, var = pred.mean.double(), pred.var_y.double() + 0.0
    yt = ft + torch.randn(ft.shape, generator=torch.Generator().manual_seed(7), dtype=ft.dtype)  # noisy truth
    rmse = float(((mean - ft) ** 2).mean().sqrt())
    nlpd = float((0.5 * torch.log(2 * torch.pi * var) + 0.5 * (yt - mean) ** 2 / var).mean())
    return {"rmse": rmse, "nlpd": nlpd, "update_cpu_s": cpu}


def mission_run(variant: str, seed: int, threads: int = 1) -> dict:
    from onlinegp.experiments.simulator.mission import MissionConfig
    from onlinegp.experiments.simulator.run import run_mission

    torch.set_num_threads(threads)
    context, _, options = VARIANTS[variant]
    with context(), tempfile.TemporaryDirectory() as out:
        result = run_mission(MissionConfig(seed=seed, model_options=options), out, quiet=True)
    rows = result.rows if hasattr(result, "rows") else result["rows"]
    last = rows[-1]
    return {
        "smse": float(last["smse"]),
        "msll": float(last["msll"]),
        "update_s_total": float(sum(r.get("update_time", 0.0) for r in rows)),
    }


def summarise(runs: dict, keys: tuple[str, ...]) -> dict:
    return {
        v: {k: {"mean": statistics.mean(r[k] for r in rs), "per_seed": [r[k] for r in rs]} for k in keys}
        for v, rs in runs.items()
    }


def run(
    seeds=(0, 1, 2),
    missions: bool = False,
    quiet: bool = False,
    mission_variants: tuple[str, ...] = ("reference", "fast", "sketch"),
    workers: int = 1,
) -> dict:
    runs: dict = {v: [] for v in VARIANTS}
    failures: dict = {}
    for seed in seeds:
        for variant in VARIANTS:
            try:
                runs[variant].append(streaming_run(variant, seed))
            except Exception as err:  # noqa: BLE001 - a variant that cannot run this problem is a result too
                failures.setdefault(variant, []).append(f"seed {seed}: {type(err).__name__}: {err}")
                continue
            if not quiet:
                print(variant, seed, {k: round(v, 4) for k, v in runs[variant][-1].items()}, flush=True)
    out = {
        "config": {"seeds": list(seeds), "n": 1500, "batch": 60, "num_inducing": 200},
        "streaming": summarise({v: r for v, r in runs.items() if r}, ("rmse", "nlpd", "update_cpu_s")),
        "failures": failures,
    }
    if missions:
        jobs = [(variant, seed) for seed in seeds for variant in mission_variants]
        with multiprocessing.get_context("spawn").Pool(workers) as pool:
            results = pool.starmap(mission_run, jobs)
        mruns: dict = {v: [] for v in mission_variants}
        for (variant, seed), result in zip(jobs, results):
            mruns[variant].append(result)
            if not quiet:
                print("mission", variant, seed, result, flush=True)
        out["missions"] = summarise(mruns, ("smse", "msll", "update_s_total"))
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--missions", action="store_true", help="also compare 3 default missions (slow)")
    parser.add_argument(
        "--mission-variants", nargs="+", default=["reference", "fast", "sketch"], choices=list(VARIANTS)
    )
    parser.add_argument("--workers", type=int, default=1, help="missions run at a time (one torch thread each)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    out = run(tuple(args.seeds), args.missions, args.quiet, tuple(args.mission_variants), args.workers)
    if "missions" in out:  # its own file: a later run without --missions keeps it
        write(
            "bench_accuracy_missions",
            {"config": {"seeds": list(args.seeds), "workers": args.workers}, "missions": out.pop("missions")},
        )
    path = write("bench_accuracy", out)
    print({v: {k: round(s["mean"], 4) for k, s in d.items()} for v, d in out["streaming"].items()}, "->", path)
    return out


if __name__ == "__main__":
    main()
