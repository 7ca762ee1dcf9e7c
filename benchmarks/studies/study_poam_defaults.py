"""Which defaults should POAM's missions use? Paired by seed, one study per question (``--study``):

``noise``: initial noise variance 0.1 vs 1.0 (the POAM paper's implementation starts its Gaussian likelihood at 1.0)
and the sketched vs exact M-step (all: Attentive Kernel, M = 500, 10 Adam steps, 5000 samples, the ``paper``
simulator profile; taken before POAM pre-trained on its first batch):

* ``noise-0.1``: the library default until this study (σ² = 0.1 in scaled units, sketched M-step, p = 64);
* ``noise-1.0``: σ² = 1.0, sketched M-step;
* ``noise-1.0-exact``: σ² = 1.0, the paper's exact M-step (``sketch=None``).

``pretrain``: does pre-training on the first batch (the pilot survey in a mission) change a mission beyond seed
noise? ``pretrain-200`` (the library default) vs ``pretrain-0`` (the paper's Algorithm 1).

Each mission runs through the ``poam-table1`` bench (``onlinegp.experiments.bench.poam.BENCHES``; resumable:
finished missions are skipped on rerun), so an interrupted study continues where it stopped. Output: ``benchmarks/studies/results/poam_defaults_study.{json,md}`` with,
per pair of variants, the mean difference of final and mission-averaged SMSE/MSLL, wins out of the pairs and a
two-sided sign test.

    python benchmarks/studies/study_poam_defaults.py --study noise --envs valley-ridges,plateau,coast --seeds 0-4 --workers 2
    python benchmarks/studies/study_poam_defaults.py --study pretrain --envs valley-ridges,coast --seeds 0-4 --budget 2000
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

from onlinegp.experiments.bench import poam as bench_poam
from onlinegp.experiments.bench.runner import SWEEP_FILE, RunnerOptions, RunSpec, code_version

STUDIES = {  # name: (variants, pairs compared, output file stem in benchmarks/studies/results)
    "noise": (
        {  # before pre-training existed: pinned off, so the study reruns as it ran
            "noise-0.1": {"noise": 0.1, "pretrain_steps": 0},
            "noise-1.0": {"noise": 1.0, "pretrain_steps": 0},
            "noise-1.0-exact": {"noise": 1.0, "sketch": None, "pretrain_steps": 0},
        },
        (("noise-1.0", "noise-0.1"), ("noise-1.0-exact", "noise-1.0")),
        "poam_defaults_study",
    ),
    "pretrain": (
        {"pretrain-0": {"pretrain_steps": 0}, "pretrain-200": {"pretrain_steps": 200}},
        (("pretrain-200", "pretrain-0"),),
        "poam_pretrain_study",
    ),
}
RESULTS = Path(__file__).parent / "results"


def metrics_of(record: bench_poam.RunRecord) -> dict[str, float]:
    c = record.columns
    return {
        "final_smse": float(c["smse"][-1]),
        "final_msll": float(c["msll"][-1]),
        "mean_smse": float(np.mean(c["smse"])),
        "mean_msll": float(np.mean(c["msll"])),
        "update_s": float(np.sum(c["update_time"])),
    }


def paired(a: dict, b: dict) -> dict[str, dict]:
    """For each metric: mean of a − b over the shared (env, seed) pairs, a's wins (lower is better) and a sign test."""
    keys = sorted(set(a) & set(b))
    out = {}
    for metric in ("final_smse", "final_msll", "mean_smse", "mean_msll"):
        diff = np.array([a[k][metric] - b[k][metric] for k in keys])
        wins = int((diff < 0).sum())
        out[metric] = {
            "mean_difference": float(diff.mean()),
            "wins": wins,
            "pairs": len(keys),
            "sign_test_p": float(binomtest(wins, int((diff != 0).sum()) or 1).pvalue),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", choices=sorted(STUDIES), default="noise")
    parser.add_argument("--envs", default="valley-ridges,plateau,coast")
    parser.add_argument("--seeds", default="0-4")
    parser.add_argument("--budget", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default="runs/study-poam-defaults")
    parser.add_argument(
        "--run-only",
        default=None,
        help="comma-separated variants to run (e.g. to split the study "
        "over processes); the others are only read back, and the tables need all to be finished",
    )
    args = parser.parse_args()
    variants, pairs, stem = STUDIES[args.study]
    options = RunnerOptions(workers=args.workers, threads=1)
    results: dict[str, dict] = {}
    for name, model_options in variants.items():
        if args.run_only and name not in args.run_only.split(","):
            continue
        own = bench_poam.Table1Options(
            envs=args.envs,
            methods="poam",
            seeds=args.seeds,
            budget=args.budget,
            paper_options=False,
            mission={"model_options": model_options},
        )
        report = bench_poam.BENCHES["poam-table1"].start(own, Path(args.out) / args.study / name, options)
        root = report.sweep.root
        specs = [RunSpec(**run) for run in json.loads((root / SWEEP_FILE).read_text())["runs"]]
        records = bench_poam.collect(root, specs)
        results[name] = {f"{r.env}/seed-{r.seed}": metrics_of(r) for r in records}
    if args.run_only:
        return
    study = {
        "code": code_version(),
        "variants": variants,
        "envs": args.envs,
        "seeds": args.seeds,
        "budget": args.budget,
        "runs": results,
        "paired": {f"{a} vs {b}": paired(results[a], results[b]) for a, b in pairs},
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(study, indent=1))
    lines = [
        f"# POAM defaults study: {args.study} ({args.envs}; seeds {args.seeds}; {args.budget} samples; {study['code']})",
        "",
        "| variant | runs | final SMSE | final MSLL | averaged SMSE | averaged MSLL | update s per mission |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, runs in results.items():
        m = {
            k: np.mean([r[k] for r in runs.values()])
            for k in ("final_smse", "final_msll", "mean_smse", "mean_msll", "update_s")
        }
        lines.append(
            f"| {name} | {len(runs)} | {m['final_smse']:.4f} | {m['final_msll']:.3f} | {m['mean_smse']:.4f} | "
            f"{m['mean_msll']:.3f} | {m['update_s']:.1f} |"
        )
    lines += [
        "",
        "| comparison (a vs b; negative = a better) | metric | mean a − b | a wins | sign test p |",
        "| --- | --- | --- | --- | --- |",
    ]
    for pair, stats in study["paired"].items():
        for metric, s in stats.items():
            lines.append(
                f"| {pair} | {metric} | {s['mean_difference']:+.4f} | {s['wins']}/{s['pairs']} | "
                f"{s['sign_test_p']:.3f} |"
            )
    (RESULTS / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
