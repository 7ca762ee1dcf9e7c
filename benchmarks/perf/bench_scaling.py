"""Constant time: update time of each online method as the data grow from 5 000 to 50 000 points.

Each registered method among POAM, OVC, OSGPR and WISKI (skipped if absent from the registry) absorbs a stream
in large batches (fast filling, untimed); at each checkpoint N it then absorbs ``repeats`` decision-epoch-sized
batches (60 points), and the median of those update times is reported, with the ratio t(50 000) / t(5 000)
(target ≤ 1.25). Memory of the model's state (its checkpoint size) is reported at each N as well. Methods that
optimise to convergence (OSGPR's L-BFGS) report how many bound evaluations each update took: their count varies
with the batch, not with N, so the time per evaluation is reported too. Each row also records the model size M
after the timed updates: a method whose selector is still adding inducing points costs more per evaluation
because M grew (O(M³)), not because N did; ``osgpr@300`` caps OSGPR at 300 inducing points, a size its selector
reaches before N = 5 000, to show its cost at a fixed M.

    python benchmarks/perf/bench_scaling.py [--methods poam ovc osgpr wiski] [--checkpoints 5000 50000]
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BOUNDS, median, stream, timed_cpu, write  # noqa: E402

from onlinegp.models.registry import MODELS, make_model  # noqa: E402

METHODS = ("poam", "ovc", "osgpr", "osgpr@300", "wiski")
#: constructor options per method; "name@M" is the registered model ``name`` with at most M inducing points
OPTIONS = {"poam": {"num_inducing": 500}, "ovc": {"num_inducing": 500}, "osgpr": {"num_inducing": 500}, "wiski": {}}


def state_bytes(model) -> int:
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return buf.tell()


def run(
    methods=METHODS,
    checkpoints=(5000, 50000),
    fill_batch: int = 5000,
    batch: int = 60,
    repeats: int = 3,
    seed: int = 0,
    quiet: bool = False,
) -> dict:
    top = max(checkpoints) + len(checkpoints) * repeats * batch
    torch.manual_seed(seed)  # the attention networks' initial weights
    X, y = stream(top, seed=seed)
    out: dict = {
        "config": {
            "checkpoints": list(checkpoints),
            "fill_batch": fill_batch,
            "batch": batch,
            "repeats": repeats,
            "seed": seed,
        },
        "methods": {},
    }
    for name in methods:
        registered, _, size = name.partition("@")
        if registered not in MODELS:
            out["methods"][name] = {"skipped": "not registered in models/registry.py"}
            continue
        options = {**OPTIONS.get(registered, {}), **({"num_inducing": int(size)} if size else {})}
        model = make_model(registered, 2, x_bounds=BOUNDS, seed=seed, **options)
        pos, rows = 0, []
        for target in sorted(checkpoints):
            while pos < target:  # fill, untimed
                step = min(fill_batch, target - pos)
                model.update(X[pos : pos + step], y[pos : pos + step])
                pos += step
            walls, cpus, evals = [], [], []
            for _ in range(repeats):
                wall, cpu, report = timed_cpu(lambda: model.update(X[pos : pos + batch], y[pos : pos + batch]))
                walls.append(wall)
                cpus.append(cpu)
                evals.append(report.extra.get("evaluations"))
                pos += batch
            rows.append(
                {
                    "num_data": target,
                    "update_s": median(walls),
                    "update_cpu_s": median(cpus),
                    "num_inducing": report.num_inducing,
                    "state_bytes": state_bytes(model),
                }
            )
            if None not in evals and sum(evals) > 0:
                rows[-1].update(evaluations=evals, cpu_s_per_evaluation=sum(cpus) / sum(evals))
            if not quiet:
                print(
                    f"{name} N={target}: update {median(walls):.3f}s (cpu {median(cpus):.3f}s) M={report.num_inducing}",
                    flush=True,
                )
        first, last = rows[0], rows[-1]
        out["methods"][name] = {
            "rows": rows,
            "ratio": last["update_s"] / first["update_s"],
            "ratio_cpu": last["update_cpu_s"] / first["update_cpu_s"],
            "state_ratio": last["state_bytes"] / first["state_bytes"],
        }
        if "cpu_s_per_evaluation" in first and "cpu_s_per_evaluation" in last:
            out["methods"][name]["ratio_cpu_per_evaluation"] = (
                last["cpu_s_per_evaluation"] / first["cpu_s_per_evaluation"]
            )
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--checkpoints", nargs="+", type=int, default=[5000, 50000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    out = run(args.methods, tuple(args.checkpoints), repeats=args.repeats, quiet=args.quiet)
    path = write("bench_scaling", out)
    print({k: v.get("ratio", v.get("skipped")) for k, v in out["methods"].items()}, "->", path)
    return out


if __name__ == "__main__":
    main()
