"""Why POAM-ONLINE-ELBO beats POAM in our ablation (issue 33, item 4): the map or the path?

In the closed-loop ablation (``onlinegp bench poam-ablation``, docs/results/poam-ablation.md) ONLINE-ELBO wins 9 of
10 pairs in mission-averaged MSLL; Chen et al. 2024 (§V-C, Fig. 8) find it level with POAM. A closed-loop mission
mixes two effects: the model's map of given samples, and the samples its own uncertainty chooses. Here every model
sees the same samples: the streams that the POAM paper's own implementation recorded
(``../shared/reference/poam/``, see its README) are replayed batch by batch (:mod:`onlinegp.experiments.replay`)
through

* ``poam``: POAM at the paper's settings (:func:`~onlinegp.experiments.bench.poam.paper_model_options`): its M-step
  takes 10 Adam steps on Eq. 10's uncollapsed ELBO, each on a mini-batch of 256 of all the data so far;
* ``poam-full-batch``: the same, each step on all the data (``batch_size`` 10⁶): isolates the mini-batch noise;
* ``online-elbo``: POAM's E-step, its 10 steps on SSGP's online collapsed bound of the new batch given the previous
  summary (Bui et al. 2017), i.e. the ablation as the ablation bench runs it;
* ``poam-new-batch``: POAM's objective (Eq. 10, q fixed) on ONLINE-ELBO's data, the new batch alone: separates the
  data the steps see from the objective;
* ``online-elbo-no-memory``: ONLINE-ELBO's steps on the collapsed bound of the new batch alone, without the previous
  summary's terms (Titsias 2009's bound of the batch): separates the online bound's memory from its collapsing.

Identical data, so any difference is the model's. With ``--missions`` the closed loop is taken apart instead: a
POAM and an ONLINE-ELBO mission per seed (the ablation bench's settings, the ``paper`` profile), each mission's
samples replayed through the other model: map x path. One thread. Each replay is saved as it finishes, and a rerun
keeps the saved ones (a long study resumes).

    OMP_NUM_THREADS=1 python benchmarks/studies/study_online_elbo.py [--streams valley-ridges_seed0,...] [--variants poam,...]
        [--updates N] [--reference ../shared/reference/poam]
    OMP_NUM_THREADS=1 python benchmarks/studies/study_online_elbo.py --missions 0,1 [--env valley-ridges]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "perf"))  # common.py, paper_code.py
from common import STUDY_RESULTS as RESULTS  # noqa: E402
from common import code_version, write  # noqa: E402

from onlinegp.experiments.protocols import PAPER_SETTINGS, paper_model_options  # noqa: E402
from onlinegp.experiments.replay import build_replay_model, load_survey, replay, summary  # noqa: E402
from onlinegp.experiments.simulator.mission import MissionConfig  # noqa: E402
from onlinegp.experiments.simulator.run import SURVEY, run_mission  # noqa: E402
from onlinegp.models import POAM, OnlineELBO, register  # noqa: E402

REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "reference" / "poam"


@register("study-poam-new-batch", "study: POAM's M-step (Eq. 10) on the new batch alone")
class POAMNewBatch(POAM):
    """POAM whose M-step draws its mini-batches from the latest batch only, as ONLINE-ELBO's steps see."""

    def _e_step(self, xs: torch.Tensor, ys: torch.Tensor) -> None:
        self._latest = (xs, ys)
        super()._e_step(xs, ys)

    def _m_step_data(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self._latest


@register("study-online-elbo-no-memory", "study: ONLINE-ELBO's steps on the new batch's bound, no previous summary")
class OnlineELBONoMemory(OnlineELBO):
    """ONLINE-ELBO whose bound forgets the previous summary: the collapsed bound of the new batch alone."""

    def _e_step(self, xs: torch.Tensor, ys: torch.Tensor) -> None:
        super()._e_step(xs, ys)
        self._previous = None


#: variant: (registered model, the model whose paper options it runs with, extra options)
VARIANTS = {
    "poam": ("poam", "poam", {}),
    "poam-full-batch": ("poam", "poam", {"batch_size": 10**6}),
    "online-elbo": ("online-elbo", "online-elbo", {}),
    "poam-new-batch": ("study-poam-new-batch", "poam", {}),
    "online-elbo-no-memory": ("study-online-elbo-no-memory", "online-elbo", {}),
}


def run(streams: list[str] | None, variants: list[str], updates: int | None, reference: Path, name: str) -> dict:
    """Replay every reference stream through ``variants``, saving after each replay; replays already saved under
    ``name`` (an earlier, interrupted run of this study) are kept, not run again."""
    saved = RESULTS / f"{name}.json"
    out: dict = (
        json.loads(saved.read_text()) if saved.is_file() else {"threads": torch.get_num_threads(), "streams": {}}
    )
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
        runs = out["streams"].setdefault(path.stem, {})
        for variant in variants:
            if variant in runs:
                continue
            model, settings, extra = VARIANTS[variant]
            options = {**paper_model_options(settings), **extra}
            rows = replay(survey, build_replay_model(model, survey, 0, options))
            runs[variant] = summary(rows) | {"options": options, "code": code_version()}
            print(f"{path.stem} {variant}: {runs[variant]}", flush=True)
            write(name, out, RESULTS)
    return out


def run_missions(seeds: list[int], env: str, name: str, work: Path) -> dict:
    """The closed loop taken apart (map x path): a POAM and an ONLINE-ELBO mission per seed at the ablation bench's
    settings, then each mission's survey replayed through the other model. A replay through the mission's own model
    gives the mission's metrics exactly (tests/experiments/test_replay.py), so the four cells are comparable."""
    saved = RESULTS / f"{name}.json"
    out: dict = (
        json.loads(saved.read_text()) if saved.is_file() else {"threads": torch.get_num_threads(), "streams": {}}
    )
    models = ("poam", "online-elbo")
    for seed in seeds:
        cells = out.setdefault("missions", {}).setdefault(f"{env}_seed{seed}", {})
        for path_model in models:
            mission_dir = work / f"{env}-{path_model}-seed{seed}"
            for map_model in sorted(models, key=lambda m: m != path_model):  # its own mission first
                cell = f"{map_model} on {path_model}'s path"
                if cell in cells:
                    continue
                options = paper_model_options(map_model)
                if map_model == path_model:
                    config = MissionConfig(
                        env=env, model=path_model, seed=seed, model_options=options, **PAPER_SETTINGS
                    )
                    rows = run_mission(config, mission_dir, quiet=True).rows
                else:
                    if not (mission_dir / SURVEY).is_file():  # an interrupted study: its own mission first
                        continue
                    survey = load_survey(mission_dir / SURVEY)
                    options = {**survey.meta["model_options"], **options}  # the mission's M, steps and kernel
                    rows = replay(survey, build_replay_model(map_model, survey, seed, options))
                cells[cell] = summary(rows) | {"options": options, "code": code_version()}
                print(f"{env} seed {seed} {cell}: {cells[cell]}", flush=True)
                write(name, out, RESULTS)
    return out


def table(result: dict) -> str:
    lines = [
        "| stream | model | averaged SMSE | averaged MSLL | final SMSE | final MSLL | median update (s) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for stream, runs in (*result["streams"].items(), *result.get("missions", {}).items()):
        for name, s in runs.items():
            lines.append(
                f"| {stream} | {name} | {s['mean_smse']:.4f} | {s['mean_msll']:+.3f} | {s['final_smse']:.4f} | "
                f"{s['final_msll']:+.3f} | {s['median_update_s']:.2f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", help="comma-separated stream names (default: every reference stream)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated variants (default: all)")
    parser.add_argument("--updates", type=int, help="replay only the first N updates (a quick check)")
    parser.add_argument("--reference", type=Path, default=REFERENCE, help="folder of the recorded streams")
    parser.add_argument("--missions", help="instead: closed-loop missions with these seeds (e.g. 0,1), crossed")
    parser.add_argument("--env", default="valley-ridges", help="the missions' environment")
    parser.add_argument("--work", type=Path, default=Path("runs/study_online_elbo"), help="the missions' folder")
    args = parser.parse_args()
    if args.missions:
        seeds = [int(s) for s in args.missions.split(",")]
        print(table(run_missions(seeds, args.env, "study_online_elbo_missions", args.work)))
        return
    variants = [v.strip() for v in args.variants.split(",")]
    if unknown := [v for v in variants if v not in VARIANTS]:
        raise SystemExit(f"unknown variant(s) {unknown}; choose from {list(VARIANTS)}")
    name = "study_online_elbo" + ("" if args.updates is None else f"_first{args.updates}")
    result = run(args.streams.split(",") if args.streams else None, variants, args.updates, args.reference, name)
    print(table(result))


if __name__ == "__main__":
    main()
