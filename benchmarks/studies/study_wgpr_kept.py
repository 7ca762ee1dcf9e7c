"""How often WGPR's members keep their pseudo-inputs, and what it saves (0.7.7).

Behind ``inducing='pivoted-or-kept'`` (:class:`onlinegp.inducing.KeptOrSelected`), WGPR's members' default since 0.7.7,
against re-selecting them at every batch by pivoted Cholesky (``'pivoted'``, before it). For each stream and each of
the two, one run records:

* ``kept``: the member updates whose selection kept the old pseudo-inputs, of those that chose (a summary and a new
  set that differs from the old);
* ``evaluations``: L-BFGS evaluations per candidate fit (a member's update; the fresh members' first fits apart);
* the run's RMSE, members and training time (wall, beside whatever else ran: compare the two runs of a stream).

Streams: the WGPR bench's kin40k (trial 0, its first 10 000 points) and lake stand-in (trial 0, its first 5000 points),
where the members move Z by gradient (the paper's setting), and the defaults check's stream of bike and skillcraft
(split 0, ``make_model('wgpr')`` as the defaults check builds it), where they do not.

    OMP_NUM_THREADS=1 python benchmarks/studies/study_wgpr_kept.py

writes ``benchmarks/studies/results/study_wgpr_kept.json``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "perf"))
from common import STUDY_RESULTS, write  # noqa: E402

from onlinegp import inducing  # noqa: E402
from onlinegp.experiments.bench.runner import code_version  # noqa: E402
from onlinegp.experiments.bench.wgpr import WgprOptions, specs_for  # noqa: E402
from onlinegp.experiments.protocols import defaults_stream, wgpr_run  # noqa: E402
from onlinegp.models import osgpr  # noqa: E402

#: stream → points of it (the bench's) or None (the defaults check's split 0)
STREAMS = {"kin40k": 10_000, "bathymetry": 5000, "bike": None, "skillcraft": None}
SELECTIONS = ("pivoted", "pivoted-or-kept")


def run(dataset: str, points: int | None, selection: str) -> dict:
    """One stream with the members' pseudo-inputs chosen by ``selection``, its selections and fits counted."""
    choices: list[bool] = []
    evaluations: list[int] = []
    choose, fit = inducing.KeptOrSelected.__call__, osgpr.OSGPR._fit

    def recording_choice(self, kernel, Z, X, **kwargs):
        chosen = choose(self, kernel, Z, X, **kwargs)
        selected = self.selector(kernel, Z, X, generator=kwargs.get("generator"), context=kwargs.get("context"))
        if Z is not None and kwargs.get("context") is not None and not torch.equal(selected, Z):
            choices.append(torch.equal(chosen, Z))
        return chosen

    def recording_fit(self, Z, xs, ys, old, *args, **kwargs):
        out = fit(self, Z, xs, ys, old, *args, **kwargs)
        if old is not None:
            evaluations.append(out[1])
        return out

    inducing.KeptOrSelected.__call__, osgpr.OSGPR._fit = recording_choice, recording_fit
    start = time.perf_counter()
    try:
        if points is not None:
            (spec,) = specs_for([dataset], ["wgpr"], [], [0], WgprOptions(max_points=points).base())
            config = {**spec.config, "member_options": {"inducing": selection}}
            with tempfile.TemporaryDirectory() as scratch:
                out = wgpr_run(config, Path(scratch))
            error, members, seconds = out["rmse"], out["num_models"], out["train_time"]
        else:
            config = {
                "dataset": dataset,
                "method": "wgpr",
                "split": 0,
                "train_size": 2000,
                "test_size": 1000,
                "batch_size": 100,
            }
            with tempfile.TemporaryDirectory() as scratch:
                out = defaults_stream(config, Path(scratch), {"member_options": {"inducing": selection}})
            error, members, seconds = out["rmse"], None, None
    finally:
        inducing.KeptOrSelected.__call__, osgpr.OSGPR._fit = choose, fit
    return {
        "kept": sum(choices),
        "chose": len(choices),
        "fits": len(evaluations),
        "evaluations_mean": statistics.fmean(evaluations) if evaluations else 0.0,
        "evaluations_median": statistics.median(evaluations) if evaluations else 0.0,
        "rmse": float(error),
        "num_models": members,
        "train_time": seconds,
        "wall_s": time.perf_counter() - start,
    }


def main() -> None:
    torch.set_num_threads(1)
    result = {"code": code_version(), "streams": {}}
    for dataset, points in STREAMS.items():
        result["streams"][dataset] = {"points": points, **{s: run(dataset, points, s) for s in SELECTIONS}}
        print(dataset, result["streams"][dataset], flush=True)
    print(write("study_wgpr_kept", result, STUDY_RESULTS))


if __name__ == "__main__":
    main()
