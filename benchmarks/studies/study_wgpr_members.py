"""Which OSGPR member fit keeps WGPR both stable and accurate: the WGPR bench's own jobs with member variants.

WGPR's members are OSGPRs (``union, settled 1e-3``: their L-BFGS fits also end once the bound per point settles,
``training.tolerance``, WGPR's default since 0.7.3, so from 0.7.3 on every variant without its own ``training`` settles
too). 0.3.0 on fit θ at the union of the selected and the dropped pseudo-inputs and charge the old data at the noise
being fitted (``fit_inducing='union'``, ``old_noise='current'``: the default), which keeps the lake stand-in stable
but costs the UCI defaults cells against 0.1.0, whose members were Bui et al. 2017's (``'selected'``, ``'fixed'``);
``'checked'`` is ``'selected'`` with the drift check (see :class:`~onlinegp.models.osgpr.OSGPR`); ``default`` means
what the recorded code ran. Each variant of :data:`VARIANTS` sets the members' options and runs:

* ``bathymetry`` (the lake stand-in) and ``toy``: the WGPR bench's job (:func:`onlinegp.experiments.protocols.wgpr_run`,
  the paper's setting: moved pseudo-inputs, ε of the bench) for each ``--seeds`` trial, with its RMSE curve;
* a UCI set (``concrete``, ``skillcraft``, ``elevators``, ``bike``, ...): the defaults check's stream of each split
  (:func:`onlinegp.experiments.protocols.defaults_stream`, ``make_model('wgpr')`` with the variant's member options).

    OMP_NUM_THREADS=1 python benchmarks/studies/study_wgpr_members.py --datasets bathymetry --seeds 0,1 \
        --variants "union fixed"

Entries go to ``benchmarks/studies/results/study_wgpr_members.json`` one by one as they finish (an interrupted study
resumes: an entry of the same dataset, seed, variant and code version is not run again). ``--render`` writes
docs/results/wgpr-members.md from that JSON alone (a test checks the page is what it renders to):

    python benchmarks/studies/study_wgpr_members.py --render
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "perf"))
from common import STUDY_RESULTS, machine  # noqa: E402

from onlinegp.experiments.bench.runner import code_version  # noqa: E402
from onlinegp.experiments.protocols import WGPR_SETTINGS, defaults_stream, wgpr_run  # noqa: E402

OUT = STUDY_RESULTS / "study_wgpr_members.json"
SCRIPT = "benchmarks/studies/study_wgpr_members.py"
PAGE = Path(__file__).resolve().parents[2] / "docs" / "results" / "wgpr-members.md"
#: member variants: the members' ``fit_inducing`` and ``old_noise``
VARIANTS = {
    "default": {},
    "bui": {"fit_inducing": "selected", "old_noise": "fixed"},
    "union fixed": {"fit_inducing": "union", "old_noise": "fixed"},
    "selected current": {"fit_inducing": "selected", "old_noise": "current"},
    "checked": {"fit_inducing": "checked", "old_noise": "current"},
    "union": {"fit_inducing": "union", "old_noise": "current"},
    "union, settled 1e-3": {"fit_inducing": "union", "old_noise": "current", "training": {"tolerance": 1e-3}},
    "checked, settled 1e-3": {"fit_inducing": "checked", "old_noise": "current", "training": {"tolerance": 1e-3}},
    "bui, settled 1e-3": {"fit_inducing": "selected", "old_noise": "fixed", "training": {"tolerance": 1e-3}},
    "bui, settled 1e-3, guarded": {"fit_inducing": "selected", "old_noise": "fixed", "training": {"tolerance": 1e-3}},
    "checked fixed, settled 1e-3": {"fit_inducing": "checked", "old_noise": "fixed", "training": {"tolerance": 1e-3}},
    "default, retry": {},
    "default, prior start": {},
    "bui, settled 1e-3, retry": {"fit_inducing": "selected", "old_noise": "fixed", "training": {"tolerance": 1e-3}},
    # pseudo-inputs chosen on a member's first batch, afterwards kept (and moved by gradient where the bench moves them)
    "default, warm Z": {"inducing": "pivoted-first"},
}
#: WGPR's own options of a variant (beside its members')
ENSEMBLE = {
    "bui, settled 1e-3, guarded": {"health_guard": True},
    "default, retry": {"fresh_start": "retry"},
    "default, prior start": {"fresh_start": "prior"},
    "bui, settled 1e-3, retry": {"fresh_start": "retry"},
}
WGPR_STREAMS = ("bathymetry", "toy")


def run_entry(dataset: str, seed: int, variant: str) -> dict:
    """One stream through WGPR with the variant's members: final RMSE (and NLPD on a UCI set), members, times."""
    members, ensemble = VARIANTS[variant], ENSEMBLE.get(variant, {})
    start, cpu = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory() as scratch:
        if dataset in WGPR_STREAMS:
            config = {
                "max_points": None,
                "max_test": 2000,
                "batch_size": 100,
                "member_steps": None,
                "optimize_inducing": True,
                "seed": seed,
                "dataset": dataset,
                "method": "wgpr",
                "params": {**WGPR_SETTINGS[dataset]["wgpr"], **ensemble},
                **({"member_options": members} if members else {}),
            }
            out = wgpr_run(config, Path(scratch))
            result = {k: out[k] for k in ("rmse", "num_models", "train_time", "cpu_time", "failed_updates")}
            result["curve"] = [[c["num_data"], c["rmse"]] for c in out["curve"]]
        else:
            config = {
                "dataset": dataset,
                "method": "wgpr",
                "split": seed,
                "train_size": 2000,
                "test_size": 1000,
                "batch_size": 100,
            }
            options = {**({"member_options": members} if members else {}), **ensemble}
            out = defaults_stream(config, Path(scratch), options or None)
            result = {"rmse": out["rmse"], "nlpd": out["nlpd"], "num_models": None}
    return {
        "dataset": dataset,
        "seed": seed,
        "variant": variant,
        "members": members,
        **({"ensemble": ensemble} if ensemble else {}),
        **result,
        "wall_s": time.perf_counter() - start,
        "cpu_s": time.process_time() - cpu,
        "code": code_version(),
        "load_average": machine()["load_average"],
    }


def render() -> str:
    """The page: every entry of the JSON, the UCI sets as RMSE / NLPD per split and variant, the WGPR streams as final
    RMSE (members, failed updates) per trial and variant, each cell with the code that ran it."""
    entries = json.loads(OUT.read_text())["entries"]
    variants = [v for v in VARIANTS if any(e["variant"] == v for e in entries)]
    lines = [
        "# Which member fit keeps WGPR stable and accurate",
        "",
        f"<!-- generated by {SCRIPT} --render from benchmarks/studies/results/{OUT.name} -->",
        "",
        f"`{SCRIPT}` runs WGPR with its OSGPR members' two options set by variant (`fit_inducing`, `old_noise`;"
        " see `OSGPR`): a UCI set through the defaults check's stream (split, 2000 training points in batches of 100,"
        " 1000 test points, `make_model('wgpr')`), a WGPR bench stream (`bathymetry`, the lake stand-in; `toy`)"
        " through the bench's own job. The variants:",
        "",
        *[
            f"- `{v}`: `{json.dumps(VARIANTS[v]) if VARIANTS[v] else 'the default members of the code that ran'}`"
            + (f", WGPR with `{json.dumps(ENSEMBLE[v])}`" if v in ENSEMBLE else "")
            for v in variants
        ],
        "",
    ]
    for streams in (False, True):
        rows = sorted({(e["dataset"], e["seed"]) for e in entries if (e["dataset"] in WGPR_STREAMS) == streams})
        if not rows:
            continue
        lines += [
            "Final test RMSE / NLPD (code version and commit in brackets):"
            if not streams
            else "Final test RMSE (members at the end; failed updates; code version and commit):",
            "",
            f"| {'dataset, split' if not streams else 'stream, trial'} | " + " | ".join(variants) + " |",
            "|---|" + "---|" * len(variants),
        ]
        for dataset, seed in rows:
            cells = []
            for v in variants:
                found = [e for e in entries if (e["dataset"], e["seed"], e["variant"]) == (dataset, seed, v)]
                cells.append("; ".join(cell(e, streams) for e in found) or "–")
            lines.append(f"| {dataset} {seed} | " + " | ".join(cells) + " |")
            if not streams and (dataset, seed + 1) not in rows and seed > 0:
                lines.append(
                    f"| *{dataset}, mean over splits 0-{seed}* | "
                    + " | ".join(mean_rmse(entries, dataset, range(seed + 1), v) for v in variants)
                    + " |"
                )
        lines.append("")
    return "\n".join(lines)


def mean_rmse(entries: list[dict], dataset: str, splits: range, variant: str) -> str:
    """The variant's RMSE averaged over the splits (each split's latest entry), or '–' where a split is missing."""
    latest = {e["seed"]: e["rmse"] for e in entries if (e["dataset"], e["variant"]) == (dataset, variant)}
    return f"{sum(latest[s] for s in splits) / len(splits):.4f}" if all(s in latest for s in splits) else "–"


def cell(entry: dict, stream: bool) -> str:
    code = entry["code"].replace(" (git ", " ").rstrip(")")
    if stream:
        return f"{entry['rmse']:.2f} ({entry['num_models']}; {entry['failed_updates']}; {code})"
    return f"{entry['rmse']:.4f} / {entry['nlpd']:.3f} ({code})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="bathymetry", help="comma-separated: bathymetry, toy or a UCI set")
    parser.add_argument("--seeds", default="0", help="comma-separated trials (a UCI set: its split)")
    parser.add_argument("--variants", default="union fixed", help=f"semicolon-separated, of {'; '.join(VARIANTS)}")
    parser.add_argument("--render", action="store_true", help=f"write {PAGE.name} from the JSON and stop")
    args = parser.parse_args()
    if args.render:
        PAGE.write_text(render())
        return
    torch.set_num_threads(1)
    data = json.loads(OUT.read_text()) if OUT.is_file() else {"benchmark": OUT.stem, "entries": []}
    for dataset in args.datasets.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            for variant in args.variants.split(";"):
                key = (dataset, seed, variant, code_version())
                if any((e["dataset"], e["seed"], e["variant"], e["code"]) == key for e in data["entries"]):
                    continue
                entry = run_entry(dataset, seed, variant)
                print(json.dumps({k: entry[k] for k in ("dataset", "seed", "variant", "rmse", "num_models")}))
                data["entries"].append(entry)
                data["machine"] = machine()
                OUT.parent.mkdir(parents=True, exist_ok=True)
                OUT.write_text(json.dumps(data, indent=1, default=float))


if __name__ == "__main__":
    main()
