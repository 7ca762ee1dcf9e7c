"""Update and prediction times of the streaming methods on the CPU and on a CUDA device, in one run.

Each method absorbs the same stream (``--batches`` batches of ``--batch`` points of the 2-D field of
``common.field``, float64, the method's defaults at ``--num-inducing`` where it takes one), once on each device; every
update is timed to the device's completion (``torch.cuda.synchronize``). Reported: the median update time after the
first ``--warmup`` batches, the time to predict at ``--test`` points, and the largest difference between the two
devices' predictive means (relative to the field's std) at the end, which shows the two ran the same method.

    python benchmarks/perf/bench_device.py                                  # on a machine with a GPU
    python benchmarks/perf/bench_device.py --methods poam,ssgp++ --num-inducing 200,1000 --threads 16

Without a GPU it times the CPU only. The commit is recorded from git, or from ``$ONLINEGP_COMMIT`` where the
checkout has no git (a copied working tree).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from common import grid, stream, write

from onlinegp import make_model

METHODS = "poam,ssgp++,osgpr,osvgp,vips,wiski,exact"
NO_INDUCING = {"vips", "wiski", "exact"}  # they size their own representation


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run(name: str, m: int, device: torch.device, args: argparse.Namespace) -> dict:
    X, y = stream(args.batch * args.batches, seed=0)
    Xt, _ = grid(int(args.test**0.5))
    options = {} if name in NO_INDUCING else {"num_inducing": m}
    if name == "exact":
        options["max_data"] = args.batch * args.batches
    model = make_model(name, **options).to(device)
    X, y, Xt = X.to(device), y.to(device), Xt.to(device)
    times = []
    for b in range(args.batches):
        sl = slice(b * args.batch, (b + 1) * args.batch)
        sync(device)
        t0 = time.perf_counter()
        model.update(X[sl], y[sl])
        sync(device)
        times.append(time.perf_counter() - t0)
    sync(device)
    t0 = time.perf_counter()
    pred = model.predict(Xt)
    sync(device)
    predict_s = time.perf_counter() - t0
    return {
        "update_s": statistics.median(times[args.warmup :]),
        "update_s_all": times,
        "predict_s": predict_s,
        "num_inducing": model.num_inducing,
        "mean": pred.mean.cpu(),
    }


def main() -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default=METHODS)
    parser.add_argument("--num-inducing", default="200,1000", help="M for the methods that take one")
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--test", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=None, help="torch threads on the CPU (default torch's)")
    parser.add_argument("--name", default="bench_device")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    devices = [torch.device("cpu")] + ([torch.device("cuda", 0)] if torch.cuda.is_available() else [])
    scale = float(stream(args.batch * args.batches, seed=0)[1].std())
    rows: list[dict] = []
    info = {
        "settings": vars(args),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "commit_env": os.environ.get("ONLINEGP_COMMIT"),
        "rows": rows,
    }
    for name in args.methods.split(","):
        sizes = [None] if name in NO_INDUCING else [int(m) for m in args.num_inducing.split(",")]
        for m in sizes:
            row = {"method": name, "M": m}
            means = {}
            for device in devices:
                try:
                    out = run(name, m, device, args)
                except Exception as error:  # a failure is a result too: record it and go on
                    row[device.type] = {"error": f"{type(error).__name__}: {error}"}
                    continue
                means[device.type] = out.pop("mean")
                row[device.type] = out
            if len(means) == 2:
                row["max_mean_difference_over_std"] = float((means["cpu"] - means["cuda"]).abs().max()) / scale
                row["speedup"] = row["cpu"]["update_s"] / row["cuda"]["update_s"]
            print(
                f"{name:8} M={m!s:5} "
                + " ".join(
                    f"{d}: {row[d]['update_s'] * 1e3:8.1f} ms/update {row[d]['predict_s'] * 1e3:7.1f} ms/predict"
                    if "update_s" in row.get(d, {})
                    else f"{d}: {row.get(d, {}).get('error', '')}"
                    for d in ("cpu", "cuda")
                    if d in row
                ),
                flush=True,
            )
            rows.append(row)
            path = write(args.name, info)  # after every row: a run cut short keeps what it measured
    print(f"wrote {path}")
    return info


if __name__ == "__main__":
    main()
