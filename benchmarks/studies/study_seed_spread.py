"""How far the final SMSE of one recorded POAM stream moves with the model's seed alone, ours and the paper's code.

Issue 31 asks that replaying the paper code's valley-ridges streams (``../shared/reference/poam``) through our POAM at
the paper's settings end within 3% of the recorded final SMSE and 0.03 of its MSLL. The data are identical in a
replay; what still varies is the model's own randomness: the Attentive Kernel network's initial weights and the
mini-batches of the 10 Adam steps per update. This study replays each stream with model seeds 0..K-1 through

* onlinegp's POAM at the paper's settings (:func:`onlinegp.experiments.bench.poam.paper_model_options`), and
* with ``--paper-code PATH``, the paper's own model code (a checkout kept outside this repository; driven as its
  benchmark script drives it, :func:`paper_code.paper_code_replay`). With the seed a stream was recorded with
  (``<env>_seed<S>``) it reproduces the recording exactly (checked below).

Both run in one process, one torch thread, interleaved seed by seed, so both see the same load. The results file is
written after every replay, and a second call skips the replays it already holds (the study resumes).

    OMP_NUM_THREADS=1 python benchmarks/studies/study_seed_spread.py --paper-code /path/to/POAM   # results/seed_spread.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "perf"))  # common.py, paper_code.py
from common import STUDY_RESULTS as RESULTS  # noqa: E402
from common import write  # noqa: E402
from paper_code import paper_code_replay, recorded_seed  # noqa: E402

from onlinegp.experiments.protocols import paper_model_options  # noqa: E402
from onlinegp.experiments.replay import build_replay_model, load_survey, replay, summary  # noqa: E402

REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "reference" / "poam"
STREAMS = ("valley-ridges_seed0", "valley-ridges_seed1")


def save(name: str, result: dict) -> None:
    result["table"] = table(result)
    write(name, result, RESULTS)


def run(streams: list[str], seeds: int, paper_code: Path | None, reference: Path, name: str) -> dict:
    """Replay every stream with seeds 0..seeds-1, ours then the paper code's, saving ``results/<name>.json`` after
    every replay; replays already saved there (same stream, who and seed) are not run again, so the study resumes."""
    done = RESULTS / f"{name}.json"
    out = json.loads(done.read_text()) if done.is_file() else {"streams": {}}
    out.pop("machine", None)  # written afresh with every save: the machine and code of the latest replays
    out["seeds"] = list(range(seeds))
    for stem in streams:
        path = reference / f"{stem}.npz"
        survey = load_survey(path)
        rec = survey.recorded
        entry = out["streams"].setdefault(stem, {"onlinegp": [], "paper_code": []})
        entry["recorded"] = {"final_smse": float(rec["smse"][-1]), "final_msll": float(rec["msll"][-1])}
        for seed in range(seeds):
            if all(r["seed"] != seed for r in entry["onlinegp"]):
                rows = replay(survey, build_replay_model("poam", survey, seed, paper_model_options("poam")))
                entry["onlinegp"].append({"seed": seed, **summary(rows)})
                print(f"{stem} onlinegp seed {seed}: {entry['onlinegp'][-1]}", flush=True)
                save(name, out)
            if paper_code is not None and all(r["seed"] != seed for r in entry["paper_code"]):
                rows = paper_code_replay(paper_code, path, seed)
                entry["paper_code"].append({"seed": seed, **summary(rows)})
                if seed == recorded_seed(stem):  # the recording's own seed: the driver must reproduce it
                    entry["paper_code_recorded_seed_max_abs_diff_smse"] = float(
                        np.max(np.abs(np.array([r["smse"] for r in rows]) - rec["smse"]))
                    )
                print(f"{stem} paper code seed {seed}: {entry['paper_code'][-1]}", flush=True)
                save(name, out)
    return out


def table(result: dict) -> str:
    lines = [
        "| stream | who | final SMSE per seed | mean ± std | vs recorded | final MSLL mean ± std | vs recorded |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for stem, entry in result["streams"].items():
        rec = entry["recorded"]
        lines.append(
            f"| {stem} | recorded (paper code, seed {recorded_seed(stem)}) | | {rec['final_smse']:.4f} | | "
            f"{rec['final_msll']:.3f} | |"
        )
        for who in ("onlinegp", "paper_code"):
            runs = entry[who]
            if not runs:
                continue
            smse = np.array([r["final_smse"] for r in runs])
            msll = np.array([r["final_msll"] for r in runs])
            lines.append(
                f"| {stem} | {'onlinegp POAM' if who == 'onlinegp' else 'the paper code'} | "
                + ", ".join(f"{v:.4f}" for v in smse)
                + f" | {smse.mean():.4f} ± {smse.std():.4f} | {smse.mean() / rec['final_smse'] - 1:+.1%} | "
                f"{msll.mean():.3f} ± {msll.std():.3f} | {msll.mean() - rec['final_msll']:+.3f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paper-code", type=Path, default=None, help="a checkout of the paper's implementation")
    parser.add_argument("--seeds", type=int, default=5, help="model seeds 0..K-1")
    parser.add_argument("--streams", default=",".join(STREAMS))
    parser.add_argument("--reference", type=Path, default=REFERENCE)
    parser.add_argument("--name", default="seed_spread")
    args = parser.parse_args()
    if not args.reference.is_dir():
        print(f"skipped: the reference streams are not at {args.reference} (they come with the project's shared/)")
        return
    torch.set_num_threads(1)
    result = run(args.streams.split(","), args.seeds, args.paper_code, args.reference, args.name)
    save(args.name, result)  # also when every replay was already saved: the table as this code writes it
    print(result["table"])


if __name__ == "__main__":
    main()
