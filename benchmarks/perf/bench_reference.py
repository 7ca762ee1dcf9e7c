"""onlinegp against the POAM paper's own implementation, on the streams that implementation recorded.

``../shared/reference/poam/valley-ridges_seed{0,1}.npz`` hold the samples, batch boundaries, evaluation grid and the
per-update SMSE, MSLL and update seconds of the paper's implementation (GPyTorch, initial noise variance 1.0,
M = 500, 10 Adam steps of batch 256). Each stream is replayed batch by batch (:mod:`onlinegp.experiments.replay`) through
onlinegp's POAM with the reference's settings (σ² = 1.0 at the start, input scaling fitted on the pilot survey),
once with the default sketched M-step and once with the paper's exact M-step: identical data, so accuracy compares
model against model. The recorded update times come from another process on another day (one thread, the same
machine kind): the speed ratio is indicative, not a same-run measurement.

The Env2 streams (``n17e073_<model>_seed0.npz``) were recorded with POAM, SSGP++ and OVC++: each is replayed through
the same onlinegp model at the paper's settings (:func:`onlinegp.experiments.bench.poam.paper_model_options`), so every
baseline is compared like for like with the paper's implementation of it. An OVC stream
(``results/n17e073_ovc_seed0.npz``: ``--reference results --streams n17e073_ovc_seed0``) is also replayed with the
paper code's Z steps (``z_steps='shared'``; ``results/ovc_reference.md``).

With ``--paper-code PATH`` (a checkout of the paper's implementation, kept outside this repository) the POAM
streams are also run through the paper's own code in the same process (:mod:`paper_code`), so its update time is
measured beside ours under the same load: a same-run speed ratio.

    OMP_NUM_THREADS=1 python benchmarks/perf/bench_reference.py [--updates 40] [--streams valley-ridges_seed0,...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write  # noqa: E402
from paper_code import paper_code_replay, recorded_seed  # noqa: E402

from onlinegp.experiments.bench.poam import label  # noqa: E402
from onlinegp.experiments.protocols import paper_model_options  # noqa: E402
from onlinegp.experiments.replay import build_replay_model, load_survey, replay, summary  # noqa: E402

REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "reference" / "poam"
#: the paper's settings (σ² = 1.0 at the start, exact M-step, no pre-training: Algorithm 1), and for POAM also the
#: library's default sketched M-step
PAPER = "paper settings"
SKETCHED = "default (sketched M-step)"
#: OVC only: Z stepped by the hyper-parameters' Adam, as the paper's code does (:class:`onlinegp.models.ovc.OVC`)
SHARED_Z = "paper settings, the paper code's Z steps (z_steps='shared')"
#: with ``--paper-code``: the paper's implementation run again on the POAM streams in this process (same load), with
#: the seed each stream was recorded with
PAPER_CODE = "the paper's implementation, this run"


def stream_model(stem: str) -> str:
    """The model a reference stream was recorded with: ``<env>_<model>_seed<S>``, or POAM for ``<env>_seed<S>``."""
    parts = stem.split("_")
    return parts[-2] if len(parts) == 3 else "poam"


def variants(model: str) -> dict[str, dict]:
    paper = paper_model_options(model)
    extra = {SKETCHED: {**paper, "sketch": 64}} if model == "poam" else {}
    if model == "ovc":
        extra = {SHARED_Z: {**paper, "z_steps": "shared"}}
    return {PAPER: paper, **extra}


def run(
    updates: int | None = None,
    streams: list[str] | None = None,
    reference: Path = REFERENCE,
    paper_code: Path | None = None,
) -> dict:
    out: dict = {"threads": torch.get_num_threads(), "streams": {}}
    for path in sorted(reference.glob("*.npz")):
        if streams and path.stem not in streams:
            continue
        model = stream_model(path.stem)
        survey = load_survey(path)
        if updates:
            keep = survey.batch_end[:updates]
            survey = type(survey)(
                survey.x[: keep[-1]],
                survey.y[: keep[-1]],
                keep,
                survey.eval_x,
                survey.eval_y,
                {k: v[:updates] for k, v in survey.recorded.items()},
                survey.meta,
            )
        rec = survey.recorded
        stream = {
            "model": model,
            "updates": len(survey.batch_end),
            "samples": int(survey.batch_end[-1]),
            "recorded": {
                "final_smse": rec["smse"][-1],
                "final_msll": rec["msll"][-1],
                "mean_smse": rec["smse"].mean(),
                "mean_msll": rec["msll"].mean(),
                "median_update_s": float(np.median(rec["update_s"])),
            },
        }
        for name, options in variants(model).items():
            rows = replay(survey, build_replay_model(model, survey, 0, options))
            stream[name] = summary(rows)
            stream[name]["options"] = options
            stream[name]["final_smse_vs_recorded"] = stream[name]["final_smse"] / rec["smse"][-1] - 1.0
            stream[name]["final_msll_minus_recorded"] = stream[name]["final_msll"] - rec["msll"][-1]
            stream[name]["speedup_vs_recorded"] = (
                stream["recorded"]["median_update_s"] / stream[name]["median_update_s"]
            )
            print(f"{path.stem} {name}: {stream[name]}", flush=True)
        if paper_code is not None and model == "poam":  # the same updates through the paper's code, same process
            rows = paper_code_replay(paper_code, path, recorded_seed(path.stem), updates)
            same = {**summary(rows), "final_smse_vs_recorded": rows[-1]["smse"] / rec["smse"][-1] - 1.0}
            same["final_msll_minus_recorded"] = rows[-1]["msll"] - rec["msll"][-1]
            same["speedup_vs_recorded"] = stream["recorded"]["median_update_s"] / same["median_update_s"]
            stream[PAPER_CODE] = same
            print(f"{path.stem} {PAPER_CODE}: {same}", flush=True)
        out["streams"][path.stem] = stream
    return out


def table(result: dict) -> str:
    lines = [
        "| stream | model | final SMSE | vs recorded | final MSLL | vs recorded | averaged SMSE | averaged MSLL | "
        "median update (s) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for stream, runs in result["streams"].items():
        name_of = label(runs["model"])
        for name in ("recorded", *variants(runs["model"]), PAPER_CODE):
            if name not in runs:
                continue
            s = runs[name]
            who = {
                "recorded": f"{name_of}, the paper's implementation (recorded)",
                PAPER_CODE: f"{name_of}, {PAPER_CODE}",
            }.get(name, f"onlinegp {name_of}, {name}")
            smse_diff = f"{s['final_smse_vs_recorded']:+.1%}" if name != "recorded" else ""
            msll_diff = f"{s['final_msll_minus_recorded']:+.3f}" if name != "recorded" else ""
            lines.append(
                f"| {stream} | {who} | {s['final_smse']:.4f} | {smse_diff} | {s['final_msll']:.3f} | {msll_diff} "
                f"| {s['mean_smse']:.4f} | {s['mean_msll']:.3f} | {s['median_update_s']:.3f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=None, help="replay only the first N updates of each stream")
    parser.add_argument("--streams", default="", help="comma-separated stream names (default: every stream)")
    parser.add_argument("--reference", type=Path, default=REFERENCE, help="folder of the reference streams")
    parser.add_argument("--name", default="bench_reference", help="results/<name>.json (e.g. a speed-only run)")
    parser.add_argument(
        "--paper-code", type=Path, default=None, help="a checkout of the paper's implementation: time it in this run"
    )
    args = parser.parse_args()
    if not args.reference.is_dir():
        print(f"skipped: the reference streams are not at {args.reference} (they come with the project's shared/)")
        return
    result = run(args.updates, [n for n in args.streams.split(",") if n] or None, args.reference, args.paper_code)
    result["table"] = table(result)
    write(args.name, result)
    print(result["table"])


if __name__ == "__main__":
    main()
