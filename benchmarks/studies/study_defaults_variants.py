"""Why a method's cell in ``onlinegp bench defaults`` moved between versions: its defaults beside option variants.

On the ``onlinegp bench defaults`` protocol, split 0 (its own job, :func:`~onlinegp.experiments.protocols.defaults_stream`, on its own split and metric
functions: 2000 training points at most in batches of 100, 1000 test points), one method (``--method``) is streamed
with its defaults and with the variants of its table in :data:`STUDIES`, and each final test RMSE / NLPD is set beside
the exact GP's of the same split and beside the method's kept cells of 0.1.0, 0.4.0 and this version (each kept cell
against its own version's exact GP, as the defaults table has it). Every variant's final RMSE is compared with each
kept cell: ``reproduces_kept`` lists the versions it matches to 1e-9 (``default`` must match this version's and every
version since the last change of the method's defaults).

WISKI (cc47e10, elevators 0.1.0 1.15 / +0.14 -> 0.4.0 1.69 / +0.55; since 0.5.0 its default is B Adam steps for a
batch of B again, as in 0.1.0):

* ``default``: the defaults of this version;
* ``steps=B``: B Adam steps for a batch of B (0.1.0's and 0.5.0's rule; concrete's last batch of 18 takes 18);
* ``steps=sqrt(B)``: ⌈√B⌉ Adam steps (0.2.0-0.4.0's rule, 10 for B = 100);
* ``steps=N``: N Adam steps per batch after the first, whatever its size;
* ``steps=10 lr x10``: ⌈√B⌉ steps at ten times both streaming rates (θ 5e-2, projection 5e-3);
* ``steps=10 lr_network x10``: ⌈√B⌉ steps at ten times the projection's streaming rate alone (5e-3);
* ``steps=B projection frozen`` / ``steps=B theta frozen``: B steps with ``lr_network=0`` (the projection stays where
  pre-training left it) or ``lr=0`` (θ stays), to tell which of the two the extra steps move.

(The rules are applied by replacing the step count WISKI hands to ``gradient_steps`` for an online update, B when
``training.steps`` is None; JSON entries written before 0.5.0 called 0.4.0's ⌈√B⌉ rule ``default``.)

WGPR (skillcraft 0.1.0 1.08 / +0.07 -> 0.4.0 1.12 / +0.11): its members are OSGPR models under L-BFGS, whose defaults
changed twice, and ``member_options`` reaches them:

* ``fit_inducing=selected``: θ fitted at the selected inducing inputs (Bui et al. 2017; 0.1.0-0.2.0), not on the
  union with the old ones dropped (0.3.0's 'union');
* ``old_noise=fixed``: old data charged at the noise of their summary (Bui et al.; 0.1.0-0.3.0), not at the noise
  being fitted (0.4.0's 'current');
* ``selected + fixed``: both, OSGPR as in 0.1.0.

O-SVGP (skillcraft 0.1.0 1.03 / +0.02 -> 0.4.0 1.04 / +0.03): since 0.3.0 (0914620) q(b)'s mean and root are stepped
in the coordinates of the prior at the batch's start; no option restores 0.1.0's raw coordinates, so

* ``raw q(b)``: 0.1.0's parametrisation, patched in for the run: q(b) = N(mean, L Lᵀ) in function values at Z (the
  start is the same q(b), its coordinates taken back through the prior's root: equal to 0.1.0's start up to rounding,
  which Adam's steps carry to the end: skillcraft's final RMSE 0.6962 where the code before 0914620 gives 0.6954,
  0.1.0's kept cell to 1e-12; concrete 0.3624 against 0.3597);
* ``whiten``: ``whiten=True``, coordinates of the prior that follow θ's steps (the library's option).

    OMP_NUM_THREADS=1 python benchmarks/studies/study_defaults_variants.py --method wiski
    OMP_NUM_THREADS=1 python benchmarks/studies/study_defaults_variants.py --method wgpr --datasets skillcraft \
        --variants default,old_noise=fixed

Writes ``benchmarks/studies/results/study_<method>_defaults.json`` (``study_wiski_defaults.json`` for WISKI): per dataset the
exact GP's RMSE / NLPD (what the ratios divide by) and the version whose kept run gave them, the kept cells, and per
variant the final RMSE, NLPD, RMSE ratio, NLPD difference, update time, the per-batch RMSE, the options the model ran
with and the onlinegp version that ran it. Datasets and variants already in the file and not run again are kept.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "perf"))  # common.py, paper_code.py
from common import STUDY_RESULTS as RESULTS  # noqa: E402
from common import write  # noqa: E402

from onlinegp import Training, __version__  # noqa: E402
from onlinegp.experiments.bench import defaults as bench  # noqa: E402
from onlinegp.experiments.bench.runner import MARKER, default_results_root  # noqa: E402
from onlinegp.experiments.protocols import defaults_stream  # noqa: E402
from onlinegp.models import osvgp, wiski  # noqa: E402
from onlinegp.models.osvgp import OSVGP, VariationalQ  # noqa: E402

#: the versions whose kept cells are shown (this version's too)
VERSIONS = ("0.1.0", "0.4.0")
#: |ΔRMSE| under which a variant reproduces a kept cell
TOLERANCE = 1e-9


@dataclass(frozen=True)
class Variant:
    """A run of the defaults job with ``options`` added to ``make_model(method, seed=split)`` and ``patch`` (a context
    manager factory, None: none) around it."""

    options: dict[str, Any] = field(default_factory=dict)
    patch: Callable[[], contextlib.AbstractContextManager] | None = None


def wiski_steps(rule: Callable[[int], int]) -> Callable[[], contextlib.AbstractContextManager]:
    """WISKI's online Adam steps for a batch of B as ``rule(B)``: the count WISKI hands ``gradient_steps`` for an
    online update (B when ``training.steps`` is None; pre-training, which passes ``schedules``, is left alone)."""
    original = wiski.gradient_steps

    def stepped(optimizers, objective, steps, *args, **kwargs):
        if "schedules" not in kwargs:
            steps = rule(steps)
        return original(optimizers, objective, steps, *args, **kwargs)

    return lambda: mock.patch.object(wiski, "gradient_steps", stepped)


class _Raw:
    """The frame of 0.1.0's raw q(b) coordinates (see :func:`osvgp_raw`)."""


@contextlib.contextmanager
def osvgp_raw() -> Iterator[None]:
    """O-SVGP's q(b) stepped in function values at Z (0.1.0, before 0914620): ``_q`` takes (mean, root) as q(b)'s own
    and the start is handed to ``_update`` premultiplied by the prior's root P₀ = chol K_bb(θ₀, Z₀), which ``_update``
    solves away again (so the parameters start at 0.1.0's start, up to rounding)."""
    raw = _Raw()
    initial_q = OSVGP._initial_q

    def start(self, Z, xs, ys):
        mean, root = initial_q(self, Z, xs, ys)
        P = osvgp.cholesky(osvgp.kuu(self.kernel, Z), self.jitter)
        return P @ mean, P @ root

    def q(self, Z, mean, root, frame):
        L = root.tril()
        return VariationalQ(Z, mean, L, 2 * L.diagonal().abs().clamp_min(1e-300).log().sum())

    with (
        mock.patch.object(OSVGP, "_initial_q", start),
        mock.patch.object(OSVGP, "_q", q),
        mock.patch.object(osvgp, "frozen", lambda kernel: raw),
    ):
        yield


def sqrt_rule(batch_size: int) -> int:
    return math.ceil(math.sqrt(batch_size))


def same(batch_size: int) -> int:
    return batch_size


#: per method, (label, variant); ``default`` first: the method as the bench builds it
STUDIES: dict[str, dict[str, Variant]] = {
    "wiski": {
        "default": Variant(),
        "steps=B": Variant(patch=wiski_steps(same)),
        "steps=sqrt(B)": Variant(patch=wiski_steps(sqrt_rule)),
        "steps=30": Variant({"training": Training(steps=30)}),
        "steps=100": Variant({"training": Training(steps=100)}),
        "steps=10 lr x10": Variant({"training": Training(lr=5e-2, lr_network=5e-3)}, wiski_steps(sqrt_rule)),
        "steps=10 lr_network x10": Variant({"training": Training(lr_network=5e-3)}, wiski_steps(sqrt_rule)),
        "steps=B projection frozen": Variant({"training": Training(lr_network=0.0)}, wiski_steps(same)),
        "steps=B theta frozen": Variant({"training": Training(lr=0.0)}, wiski_steps(same)),
    },
    "wgpr": {
        "default": Variant(),
        "fit_inducing=selected": Variant({"member_options": {"fit_inducing": "selected"}}),
        "old_noise=fixed": Variant({"member_options": {"old_noise": "fixed"}}),
        "selected + fixed": Variant({"member_options": {"fit_inducing": "selected", "old_noise": "fixed"}}),
    },
    "osvgp": {
        "default": Variant(),
        "raw q(b)": Variant(patch=osvgp_raw),
        "whiten": Variant({"whiten": True}),
    },
}


def kept(spec, version: str) -> dict | None:
    """The final row of the kept run of ``spec`` of ``version``, None when the results tree lacks it."""
    marker = default_results_root() / "defaults" / spec.key(version) / MARKER
    return json.loads(marker.read_text())["value"] if marker.exists() else None


def run_job(config: dict, variant: Variant = Variant()) -> tuple[dict, list[dict], dict]:
    """The defaults job on ``config`` (:func:`~onlinegp.experiments.protocols.defaults_stream`) with ``variant``'s
    options added to the streamed method's: its final row, per-batch rows and model record."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        variant.patch() if variant.patch else contextlib.nullcontext(),
    ):
        final = defaults_stream(config, Path(tmp), variant.options)
        with open(Path(tmp) / "metrics.csv") as f:
            rows = list(csv.DictReader(f))
        record = json.loads((Path(tmp) / "model.json").read_text())
    return final, rows, record


def cell(run: dict, exact: dict) -> dict:
    """The defaults table's cell: RMSE ratio and NLPD difference to the exact GP."""
    return {"rmse_ratio": run["rmse"] / exact["rmse"], "nlpd_diff": run["nlpd"] - exact["nlpd"]}


def study_dataset(dataset: str, method: str, labels: list[str], entry: dict) -> Iterator[dict]:
    """Run ``labels`` of ``method`` on ``dataset`` into ``entry`` (yielding it after each variant)."""
    exact_spec, spec = bench.specs(bench.DefaultsOptions([dataset], [method], 1, 2000, 1000, 100))
    versions = list(dict.fromkeys((*VERSIONS, __version__)))
    exacts = {v: kept(exact_spec, v) for v in versions}
    # this version's exact GP, else the newest kept one (the exact GP has not changed since 0.4.0), else run here
    exact_version = next((v for v in reversed(versions) if exacts[v] is not None), None)
    if exact_version is None:
        print(f"{dataset}: the exact GP is not kept; running it", flush=True)
        exact, exact_version = run_job(exact_spec.config)[0], __version__
    else:
        exact = exacts[exact_version]
    cells = {v: kept(spec, v) for v in versions}
    entry |= {
        "exact_rmse": exact["rmse"],
        "exact_nlpd": exact["nlpd"],
        "exact_version": exact_version,
        "kept": {
            f"{v} kept": None
            if run is None
            else {"rmse": run["rmse"], "nlpd": run["nlpd"]} | cell(run, exacts[v] or exact)
            for v, run in cells.items()
        },
    }
    entry.setdefault("variants", {})
    for label in labels:
        final, rows, record = run_job(spec.config, STUDIES[method][label])
        diffs = {v: abs(final["rmse"] - run["rmse"]) for v, run in cells.items() if run is not None}
        entry["variants"][label] = {
            "rmse": final["rmse"],
            "nlpd": final["nlpd"],
            **cell(final, exact),
            "update_time": final["update_time"],
            "rmse_per_batch": [float(r["rmse"]) for r in rows],
            "options": record["options"],
            "onlinegp": __version__,
            "kept_rmse_diff": diffs,
            "reproduces_kept": [v for v, d in diffs.items() if d < TOLERANCE],
        }
        r = entry["variants"][label]
        print(
            f"{dataset} {method} {label}: RMSE {final['rmse']:.6f} ({r['rmse_ratio']:.3f}x) NLPD {final['nlpd']:.3f} "
            f"({r['nlpd_diff']:+.3f}) {final['update_time']:.1f} s; reproduces {r['reproduces_kept'] or 'none'}",
            flush=True,
        )
        yield entry


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--method", default="wiski", choices=list(STUDIES))
    ap.add_argument("--datasets", default="concrete,elevators,skillcraft")
    ap.add_argument("--variants", default=None, help="comma-separated labels of STUDIES[method] (default: all)")
    ap.add_argument(
        "--name", default=None, help="output file stem in benchmarks/studies/results (study_<method>_defaults)"
    )
    args = ap.parse_args()
    variants = STUDIES[args.method]
    labels = list(variants) if args.variants is None else args.variants.split(",")
    unknown = [v for v in labels if v not in variants]
    if unknown:
        ap.error(f"unknown variant(s) {unknown} of {args.method}; choose from {list(variants)}")
    name = args.name or f"study_{args.method}_defaults"
    path = RESULTS / f"{name}.json"
    out = json.loads(path.read_text()) if path.exists() else {}
    out = {
        "method": args.method,
        "protocol": "onlinegp bench defaults, split 0, 2000 / 1000 points, batches of 100",
        "datasets": out.get("datasets", {}),
    }
    for dataset in args.datasets.split(","):
        entry = out["datasets"].setdefault(dataset, {})
        for _ in study_dataset(dataset, args.method, labels, entry):
            write(name, out, RESULTS)


if __name__ == "__main__":
    main()
