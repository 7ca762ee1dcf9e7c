"""Why WISKI's defaults cell on elevators got worse from onlinegp 0.1.0 (1.15 / +0.14) to 0.4.0 (1.69 / +0.55).

On the ``onlinegp bench defaults`` protocol, split 0 (its own job, :func:`defaults_job`, on its own split and metric
functions: 2000 training points at most in batches of 100, 1000 test points), WISKI is streamed with its defaults and
with variants of its ``training`` spec, and each final test RMSE / NLPD is set beside the exact GP's of the same
split (the kept run of this version in ``results/defaults``, or run here when it is not kept) and beside the kept
WISKI cells of 0.1.0 and of this version.

WISKI's defaults changed three times since 0.1.0: a batch of B points takes ⌈√B⌉ Adam steps (10 for B = 100) where it
took B (100); a first batch under ``MIN_FIT_POINTS`` is held until θ can be fitted (never the case for batches of 100);
and the ``training`` spec replaced the flat keywords (issue 32, bit for bit). Variants:

* ``default``: the defaults of this version (must reproduce the kept cell: checked, ``reproduces_kept``);
* ``steps=B``: 0.1.0's rule, B Adam steps for a batch of B (``batch_steps`` replaced for the run; concrete's last
  batch of 18 takes 18), the only default of 0.1.0 that differs for batches of 100;
* ``steps=N``: N Adam steps per batch after the first, whatever its size;
* ``steps=10 lr x10``: the default ⌈√B⌉ steps (10 for B = 100) at ten times both streaming rates (θ 5e-2,
  projection 5e-3);
* ``steps=10 lr_network x10``: the default ⌈√B⌉ steps at ten times the projection's streaming rate alone (5e-3);
* ``steps=B projection frozen`` / ``steps=B theta frozen``: 0.1.0's rule with ``lr_network=0`` (the projection
  stays where pre-training left it) or ``lr=0`` (θ stays), to tell which of the two the extra steps move.

    OMP_NUM_THREADS=1 python benchmarks/study_wiski_defaults.py
    OMP_NUM_THREADS=1 python benchmarks/study_wiski_defaults.py --datasets elevators --variants default,steps=B

Writes ``benchmarks/results/study_wiski_defaults.json``: per dataset the exact GP's RMSE / NLPD (what the ratios
divide by), the kept cells, and per variant the final RMSE, NLPD, RMSE ratio, NLPD difference, update time, the
per-batch RMSE and the training spec the model ran with.
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write  # noqa: E402

from onlinegp import Training  # noqa: E402
from onlinegp.experiments.bench import defaults as bench  # noqa: E402
from onlinegp.experiments.bench.runner import MARKER, default_results_root, kept_only  # noqa: E402
from onlinegp.models import wiski  # noqa: E402

#: (label, (WISKI's ``training`` option, the steps a batch of B takes when ``training.steps`` is None)); None: the
#: library's (its defaults; ⌈√B⌉, :func:`onlinegp.models.wiski.batch_steps`)
VARIANTS = {
    "default": (None, None),
    "steps=B": (None, lambda batch_size: batch_size),
    "steps=30": (Training(steps=30), None),
    "steps=100": (Training(steps=100), None),
    "steps=10 lr x10": (Training(lr=5e-2, lr_network=5e-3), None),
    "steps=10 lr_network x10": (Training(lr_network=5e-3), None),
    "steps=B projection frozen": (Training(lr_network=0.0), lambda batch_size: batch_size),
    "steps=B theta frozen": (Training(lr=0.0), lambda batch_size: batch_size),
}
OLD = "0.1.0"


def kept(spec, version: str | None = None) -> dict | None:
    """The final row of a kept run of ``spec`` (of ``version``, else of this one), None when the tree lacks it."""
    if version is None:
        key = spec.config_hash
    else:
        with kept_only(version):
            key = spec.config_hash
    marker = default_results_root() / "defaults" / key / MARKER
    return json.loads(marker.read_text())["value"] if marker.exists() else None


def run_job(
    config: dict, training: Training | None = None, rule: Callable[[int], int] | None = None
) -> tuple[dict, list[dict], dict]:
    """The defaults job on ``config`` with WISKI built with ``training`` (None: as the bench builds it) and ``rule``
    in place of :func:`onlinegp.models.wiski.batch_steps` (None: kept): its final row, per-batch rows and model
    record."""
    make = bench.make_model if training is None else functools.partial(bench.make_model, training=training)
    with (
        tempfile.TemporaryDirectory() as tmp,
        mock.patch.object(bench, "make_model", make),
        mock.patch.object(wiski, "batch_steps", rule or wiski.batch_steps),
    ):
        final = bench.defaults_job(config, Path(tmp))
        with open(Path(tmp) / "metrics.csv") as f:
            rows = list(csv.DictReader(f))
        record = json.loads((Path(tmp) / "model.json").read_text())
    return final, rows, record


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="concrete,elevators,skillcraft")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated labels of VARIANTS")
    ap.add_argument("--name", default="study_wiski_defaults", help="output file stem in benchmarks/results")
    args = ap.parse_args()
    labels = args.variants.split(",")
    unknown = [v for v in labels if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variant(s) {unknown}; choose from {list(VARIANTS)}")
    out = {"protocol": "onlinegp bench defaults, split 0, 2000 / 1000 points, batches of 100", "datasets": {}}
    for dataset in args.datasets.split(","):
        exact_spec, wiski_spec = bench.specs([dataset], ["wiski"], 1, 2000, 1000, 100)
        exact = kept(exact_spec)
        if exact is None:
            print(f"{dataset}: the exact GP is not kept for this version; running it")
            exact = run_job(exact_spec.config)[0]
        cells = {"0.4.0 kept": kept(wiski_spec), f"{OLD} kept": kept(wiski_spec, OLD)}
        entry = {
            "exact_rmse": exact["rmse"],
            "exact_nlpd": exact["nlpd"],
            "kept": {
                k: None if v is None else {"rmse": v["rmse"], "nlpd": v["nlpd"]} | cell(v, exact)
                for k, v in cells.items()
            },
            "variants": {},
        }
        for label in labels:
            final, rows, record = run_job(wiski_spec.config, *VARIANTS[label])
            result = {
                "rmse": final["rmse"],
                "nlpd": final["nlpd"],
                **cell(final, exact),
                "update_time": final["update_time"],
                "rmse_per_batch": [float(r["rmse"]) for r in rows],
                "training": record["options"].get("training"),
            }
            if label == "default" and cells["0.4.0 kept"] is not None:
                result["reproduces_kept"] = abs(final["rmse"] - cells["0.4.0 kept"]["rmse"]) < 1e-6
            entry["variants"][label] = result
            print(
                f"{dataset} {label}: RMSE {final['rmse']:.4f} ({result['rmse_ratio']:.2f}x) "
                f"NLPD {final['nlpd']:.3f} ({result['nlpd_diff']:+.2f}) {final['update_time']:.1f} s",
                flush=True,
            )
        out["datasets"][dataset] = entry
        write(args.name, out)


def cell(run: dict, exact: dict) -> dict:
    """The defaults table's cell: RMSE ratio and NLPD difference to the exact GP."""
    return {"rmse_ratio": run["rmse"] / exact["rmse"], "nlpd_diff": run["nlpd"] - exact["nlpd"]}


if __name__ == "__main__":
    main()
