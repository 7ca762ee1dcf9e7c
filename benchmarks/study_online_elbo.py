"""Why POAM-ONLINE-ELBO beats POAM in our ablation (issue 33, item 4): the map or the path?

In the closed-loop ablation (``onlinegp bench poam-ablation``, docs/results/poam-ablation.md) ONLINE-ELBO wins 9 of
10 pairs in mission-averaged MSLL; Chen et al. 2024 (§V-C, Fig. 8) find it level with POAM. A closed-loop mission
mixes two effects: the model's map of given samples, and the samples its own uncertainty chooses. Here every model
sees the same samples: the streams that the POAM paper's own implementation recorded
(``../shared/reference/poam/``, see its README) are replayed batch by batch (:mod:`onlinegp.experiments.replay`)
through

* ``poam``: POAM at the paper's settings (:func:`~onlinegp.experiments.bench.poam.paper_model_options`): its M-step
  takes 10 Adam steps on Eq. 10's uncollapsed ELBO, each on a mini-batch of 256 of all the data so far;
* ``poam, full-batch M-step``: the same, each step on all the data (``batch_size`` 10⁶): isolates the mini-batch noise;
* ``online-elbo``: POAM's E-step, its 10 steps on SSGP's online collapsed bound of the new batch given the previous
  summary (Bui et al. 2017), i.e. the ablation as the ablation bench runs it.

Identical data, so any difference is the model's. One thread, all replays in one process.

    OMP_NUM_THREADS=1 python benchmarks/study_online_elbo.py [--streams valley-ridges_seed0,...] [--updates N]
        [--reference ../shared/reference/poam]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write  # noqa: E402

from onlinegp.experiments.bench.poam import paper_model_options  # noqa: E402
from onlinegp.experiments.replay import build_replay_model, load_survey, replay, summary  # noqa: E402

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference" / "poam"
VARIANTS = {
    "poam": ("poam", {}),
    "poam, full-batch M-step": ("poam", {"batch_size": 10**6}),
    "online-elbo": ("online-elbo", {}),
}


def run(streams: list[str] | None, updates: int | None, reference: Path = REFERENCE) -> dict:
    out: dict = {"threads": torch.get_num_threads(), "variants": list(VARIANTS), "streams": {}}
    paths = sorted(reference.glob("*.npz"))
    if not paths:
        raise SystemExit(f"no reference streams in {reference}: pass --reference DIR")
    for path in paths:
        if streams and path.stem not in streams:
            continue
        survey = load_survey(path)
        if updates:
            keep = survey.batch_end[:updates]
            survey = type(survey)(
                survey.x[: keep[-1]], survey.y[: keep[-1]], keep, survey.eval_x, survey.eval_y, {}, survey.meta
            )
        runs = {}
        for name, (model, extra) in VARIANTS.items():
            options = {**paper_model_options(model), **extra}
            runs[name] = summary(replay(survey, build_replay_model(model, survey, 0, options))) | {"options": options}
            print(f"{path.stem} {name}: {runs[name]}", flush=True)
        out["streams"][path.stem] = runs
    return out


def table(result: dict) -> str:
    lines = [
        "| stream | model | averaged SMSE | averaged MSLL | final SMSE | final MSLL | median update (s) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for stream, runs in result["streams"].items():
        for name, s in runs.items():
            lines.append(
                f"| {stream} | {name} | {s['mean_smse']:.4f} | {s['mean_msll']:+.3f} | {s['final_smse']:.4f} | "
                f"{s['final_msll']:+.3f} | {s['median_update_s']:.2f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", help="comma-separated stream names (default: every reference stream)")
    parser.add_argument("--updates", type=int, help="replay only the first N updates (a quick check)")
    parser.add_argument("--reference", type=Path, default=REFERENCE, help="folder of the recorded streams")
    args = parser.parse_args()
    result = run(args.streams.split(",") if args.streams else None, args.updates, args.reference)
    name = "study_online_elbo" + ("" if args.updates is None else f"_first{args.updates}")
    print(write(name, result))
    print(table(result))


if __name__ == "__main__":
    main()
