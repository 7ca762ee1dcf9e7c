"""One SSGP++ decision epoch (Chen et al. 2024, app. A4: OSGPR of Bui et al. 2017 with the Attentive Kernel,
pivoted-Cholesky Z, 10 Adam steps on the online bound): the fixed-Z bound (:class:`onlinegp.objectives.OnlineBound`:
one kernel matrix on the union of the inputs, θ-independent pieces once per batch, closed-form gradient) against
the plain one (autograd through :func:`onlinegp.objectives.online_bound`, what every step did before), in one run.

Setting as bench_poam_epoch.py: M = 500, float64, a pilot survey of 1000 samples in batches of 250, then epochs of 60
samples. For each timed epoch both paths start from the same model state and absorb the same batch (order alternated,
so load drifts hit both); the hyper-parameters after the epoch agree to round-off, which is checked and reported.
POAM's default epoch on the same stream is timed too, for the ratio the issue quotes.

    python benchmarks/perf/bench_ssgp_epoch.py [--epochs 7] [--threads 1]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BOUNDS, median, stream, timed_cpu, write  # noqa: E402

import onlinegp.models.osgpr as osgpr  # noqa: E402
from onlinegp import POAM  # noqa: E402
from onlinegp.models.registry import make_model  # noqa: E402
from onlinegp.objectives import online_bound  # noqa: E402


class PlainBound:
    """The bound as ``OSGPR._fit`` evaluated it before OnlineBound: autograd through online_bound at every step."""

    def __init__(self, kernel, Z, X, y, old, jitter_log):
        self.args = kernel, Z, X, y, old, jitter_log

    def __call__(self, noise):
        kernel, Z, X, y, old, jitter_log = self.args
        return online_bound(kernel, noise, Z, X, y, old, jitter_log)


@contextlib.contextmanager
def plain_bound():
    fast = osgpr.OnlineBound
    osgpr.OnlineBound = PlainBound
    try:
        yield
    finally:
        osgpr.OnlineBound = fast


def params_diff(a: torch.nn.Module, b: torch.nn.Module) -> float:
    return max(float((p - q).detach().abs().max()) for p, q in zip(a.parameters(), b.parameters()))


def run(epochs: int = 7, num_inducing: int = 500, pilot: int = 1000, batch: int = 60, seed: int = 0) -> dict:
    load_before = os.getloadavg()[0]
    torch.manual_seed(seed)
    X, y = stream(pilot + epochs * batch, seed=seed)
    fast = make_model("ssgp++", 2, num_inducing=num_inducing, x_bounds=BOUNDS, seed=seed)
    plain = make_model("ssgp++", 2, num_inducing=num_inducing, x_bounds=BOUNDS, seed=seed)
    poam = POAM(2, num_inducing=num_inducing, x_bounds=BOUNDS, seed=seed)
    for lo in range(0, pilot, 250):
        fast.update(X[lo : lo + 250], y[lo : lo + 250])
        poam.update(X[lo : lo + 250], y[lo : lo + 250])
    rows = []
    for e in range(epochs):
        lo = pilot + e * batch
        xb, yb = X[lo : lo + batch], y[lo : lo + batch]
        plain.load_state_dict(fast.state_dict())
        results = {}
        for name in ("plain", "fast") if e % 2 == 0 else ("fast", "plain"):
            with plain_bound() if name == "plain" else contextlib.nullcontext():
                model = plain if name == "plain" else fast
                results[name] = timed_cpu(lambda: model.update(xb, yb))
        t_poam, c_poam, _ = timed_cpu(lambda: poam.update(xb, yb))
        row = {"epoch": e, "num_inducing": fast.num_inducing, "poam_s": t_poam, "poam_cpu_s": c_poam}
        for name, (t, c, report) in results.items():
            row |= {f"{name}_s": t, f"{name}_cpu_s": c, f"{name}_phases": report.timings}
        row["param_maxdiff"] = params_diff(fast.kernel, plain.kernel)
        row["objective_reldiff"] = abs(results["fast"][2].objective / results["plain"][2].objective - 1)
        rows.append(row)
        print(
            f"epoch {e}: plain {row['plain_s']:.3f}s fast {row['fast_s']:.3f}s "
            f"ratio {row['plain_s'] / row['fast_s']:.2f} (cpu {row['plain_cpu_s'] / row['fast_cpu_s']:.2f}) "
            f"poam {t_poam:.3f}s dparam {row['param_maxdiff']:.1e}",
            flush=True,
        )
    timed_rows = rows[1:] if len(rows) > 2 else rows  # the first epoch pays one-off warm-up costs
    summary = {
        key: median([r[key] for r in timed_rows])
        for key in ("plain_s", "fast_s", "plain_cpu_s", "fast_cpu_s", "poam_s", "poam_cpu_s")
    }
    for name in ("plain", "fast"):
        phases = timed_rows[0][f"{name}_phases"]
        summary[f"{name}_phases_s"] = {k: median([r[f"{name}_phases"][k] for r in timed_rows]) for k in phases}
    summary["ratio"] = summary["plain_s"] / summary["fast_s"]
    summary["ratio_cpu"] = summary["plain_cpu_s"] / summary["fast_cpu_s"]
    summary["ratio_per_epoch_median"] = median([r["plain_s"] / r["fast_s"] for r in timed_rows])
    summary["fast_over_poam"] = summary["fast_s"] / summary["poam_s"]
    summary["plain_over_poam"] = summary["plain_s"] / summary["poam_s"]
    summary["param_maxdiff"] = max(r["param_maxdiff"] for r in rows)
    summary["objective_reldiff"] = max(r["objective_reldiff"] for r in rows)
    config = {
        "epochs": epochs,
        "num_inducing": num_inducing,
        "pilot": pilot,
        "batch": batch,
        "seed": seed,
        "num_steps": fast.num_steps,
        "threads": torch.get_num_threads(),
        "loadavg_before": load_before,
    }
    return {"config": config, "summary": summary, "epochs": rows}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=7)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    out = run(epochs=args.epochs)
    out["config"]["loadavg_after"] = os.getloadavg()[0]
    path = write("bench_ssgp_epoch", out)
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in out["summary"].items()}, "->", path)
    return out


if __name__ == "__main__":
    main()
