"""Why four vehicles end behind one on seafloor (issue 34): the samples or the model?

On the bundled ``seafloor`` terrain a fleet of four (joint goals, asynchronous replanning) ends at 1.37x one vehicle's
final SMSE at the same 5000 samples. This study takes the kept missions apart, seed by seed:

* **early**: the sample index at which the mission first samples the deep basin (elevation below 120 of 255, 5% of
  the field and most of its variance early on), and the SMSE at equal sample counts;
* **coverage**: the distance from each evaluation cell to its nearest sample (mean, 95th percentile);
* **samples or model**: the exact GP posterior mean of each mission's 5000 samples under its own final θ and under
  the other mission's (the final POAM model's kernel, noise and scaling; a dense Cholesky, Rasmussen and Williams
  2006, Alg. 2.1). If the fleet's samples under one vehicle's θ still map worse, the gap is in where the fleet
  sampled, not in its online model.

The missions are those of ``onlinegp bench fleet --envs seafloor --robots 1,4 --coordinations joint`` (the kept runs
of ``results/fleet``); their samples and final models are not kept, so the study reads them from a sweep's ``--out``
directory, or reruns them there (about 20 minutes on one core) and checks that every rerun's final SMSE is the kept
run's to 1e-9, so the numbers are those of the kept runs.

    OMP_NUM_THREADS=1 python benchmarks/studies/study_fleet_seafloor.py [--runs DIR] [--seeds 0-4]

writes ``benchmarks/studies/results/study_fleet_seafloor.md`` and the figure ``docs/results/fleet-seafloor-early.png`` (the
first samples of the first seed's two missions over the terrain).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from scipy.spatial import cKDTree

import onlinegp
from onlinegp.experiments.bench.parse import parse_seeds
from onlinegp.experiments.bench.runner import default_results_root

RESULTS = Path(__file__).resolve().parent / "results"
FIGURE = Path(__file__).resolve().parents[2] / "docs" / "results" / "fleet-seafloor-early.png"
GROUPS = ("k1", "k4-joint-async")
DEEP = 120.0  # elevation (0-255) below which a cell is in the basin
SLOPE = 200.0  # elevation below which a cell is in the basin or on its slopes (the shelf lies at 200-255)
MILESTONES = (1000, 1500, 2000, 3000, 4000, 5000)


def kept_final_smse(run_id: str) -> float:
    """The final SMSE of the kept run of this version (``results/fleet``)."""
    for spec in (default_results_root() / "fleet").glob("*/spec.json"):
        if json.loads(spec.read_text())["run_id"] != run_id:
            continue
        done = json.loads((spec.parent / "DONE.json").read_text())
        if done["code"].split()[0] == onlinegp.__version__:
            return float(done["value"]["smse"])
    raise SystemExit(f"no kept run {run_id} of onlinegp {onlinegp.__version__} in {default_results_root() / 'fleet'}")


def ensure_runs(runs: Path, seeds: list[int]) -> None:
    missing = [s for s in seeds for g in GROUPS if not (runs / "seafloor" / g / f"seed-{s}" / "model.pt").exists()]
    if missing:
        seed_list = ",".join(str(s) for s in sorted(set(missing)))
        command = [
            sys.executable, "-m", "onlinegp", "bench", "fleet", "--envs", "seafloor", "--robots", "1,4",
            "--coordinations", "joint", "--fleets", "shared", "--seeds", seed_list, "--no-results", "--out", str(runs),
            "-q",
        ]  # fmt: skip
        print("running:", " ".join(command[2:]), flush=True)
        subprocess.run(command, check=True)


def load(run: Path) -> tuple[onlinegp.POAM, dict]:
    config = json.loads((run / "config.json").read_text())["config"]
    extent = config["task_extent"]
    model = onlinegp.POAM.load(
        str(run / "model.pt"),
        kernel=config["kernel"],
        num_inducing=config["num_inducing"],
        noise=config["model_options"]["noise"],
        x_bounds=[[extent[0], extent[2]], [extent[1], extent[3]]],
    )
    return model, dict(np.load(run / "survey.npz"))


def smse(mean: np.ndarray, survey: dict) -> float:
    return float(np.mean((mean - survey["eval_y"]) ** 2) / np.var(survey["eval_y"]))


def exact_mean(theta_from: onlinegp.POAM, survey: dict) -> np.ndarray:
    """The exact GP's posterior mean of ``survey``'s samples under ``theta_from``'s kernel, noise and scaling."""
    scale = theta_from.scaler
    x = scale.x(torch.as_tensor(survey["x"]))
    y = scale.y(torch.as_tensor(survey["y"])).reshape(-1, 1)
    with torch.no_grad():
        gram = theta_from.kernel(x).to_dense()
        gram.diagonal().add_(theta_from.likelihood.noise.item())
        root = torch.linalg.cholesky(gram)
        weights = torch.cholesky_solve(y, root)
        mean = theta_from.kernel(scale.x(torch.as_tensor(survey["eval_x"])), x).to_dense() @ weights
    return scale.y_inverse_mean(mean.ravel()).numpy()


def smse_at(survey: dict, count: int) -> float:
    """The SMSE of the first evaluation at or past ``count`` samples."""
    index = min(int(np.searchsorted(survey["batch_end"], count)), len(survey["smse"]) - 1)
    return float(survey["smse"][index])


def study(runs: Path, seeds: list[int]) -> str:
    rows, early, cover, exact = [], [], [], []
    for seed in seeds:
        pair = {}
        for group in GROUPS:
            run = runs / "seafloor" / group / f"seed-{seed}"
            model, survey = load(run)
            mean = np.asarray(model.predict(survey["eval_x"]).mean).ravel()
            final = smse(mean, survey)
            error = (mean - survey["eval_y"]) ** 2
            basin_share = error[survey["eval_y"] < SLOPE].sum() / error.sum()
            kept = kept_final_smse(f"seafloor/{group}/seed-{seed}")
            if abs(final - kept) > 1e-9:
                raise SystemExit(f"{run}: final SMSE {final:.10g} is not the kept run's {kept:.10g}")
            deep = np.flatnonzero(survey["y"] < DEEP)
            distance, _ = cKDTree(survey["x"]).query(survey["eval_x"])
            pair[group] = (model, survey)
            early.append(
                f"| {seed} | {group} | {deep[0] if len(deep) else 'never'} | "
                + " | ".join(f"{smse_at(survey, n):.4f}" for n in MILESTONES)
                + " |"
            )
            cover.append(
                f"| {seed} | {group} | {distance.mean():.2f} | {np.percentile(distance, 95):.2f} | {basin_share:.2f} |"
            )
            rows.append(final)
        (one, one_survey), (fleet, fleet_survey) = pair["k1"], pair["k4-joint-async"]
        exact.append(
            (
                seed,
                smse(exact_mean(one, one_survey), one_survey),
                smse(exact_mean(fleet, fleet_survey), fleet_survey),
                smse(exact_mean(one, fleet_survey), fleet_survey),
                smse(exact_mean(fleet, one_survey), one_survey),
            )
        )
        print(f"seed {seed} done", flush=True)
    finals = np.array(rows).reshape(len(seeds), 2)
    table = np.array([e[1:] for e in exact])
    lines = [
        "# Why four vehicles end behind one on seafloor",
        "",
        f"`OMP_NUM_THREADS=1 python benchmarks/studies/study_fleet_seafloor.py --seeds {','.join(map(str, seeds))}` "
        f"(onlinegp {onlinegp.__version__}); the missions of `onlinegp bench fleet --envs seafloor --robots 1,4 "
        "--coordinations joint`, each rerun's final SMSE checked against the kept run's (`results/fleet`).",
        "",
        f"## Early: the first sample in the basin (elevation < {DEEP:g}) and the SMSE at equal samples",
        "",
        "| Seed | Fleet | First basin sample | " + " | ".join(f"SMSE at {n}" for n in MILESTONES) + " |",
        "|---|---|---|" + "---|" * len(MILESTONES),
        *early,
        "",
        "## Coverage: distance (m) from each evaluation cell to its nearest sample, and where the error is, at the end",
        "",
        f"| Seed | Fleet | Mean distance | 95th percentile | Share of the final squared error on cells below {SLOPE:g} |",
        "|---|---|---|---|---|",
        *cover,
        "",
        "## Samples or model: final SMSE of the online model and of the exact GP of the same 5000 samples",
        "",
        "| Seed | POAM, one vehicle | POAM, four | Exact, one vehicle's samples and θ | Exact, four's samples "
        "and θ | Exact, four's samples, one vehicle's θ | Exact, one vehicle's samples, four's θ |",
        "|---|---|---|---|---|---|---|",
        *(
            f"| {e[0]} | {f[0]:.4f} | {f[1]:.4f} | " + " | ".join(f"{v:.4f}" for v in e[1:]) + " |"
            for e, f in zip(exact, finals)
        ),
        f"| mean | {finals[:, 0].mean():.4f} | {finals[:, 1].mean():.4f} | "
        + " | ".join(f"{v:.4f}" for v in table.mean(axis=0))
        + " |",
        "",
    ]
    return "\n".join(lines)


def plot_early(runs: Path, seed: int, count: int = 1100) -> None:
    """The first ``count`` samples of both missions of ``seed``, coloured by their index, over the terrain."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.6), sharey=True)
    for ax, group in zip(axes, GROUPS):
        survey = dict(np.load(runs / "seafloor" / group / f"seed-{seed}" / "survey.npz"))
        grid = survey["eval_x"]
        ax.scatter(grid[:, 0], grid[:, 1], c=survey["eval_y"], s=14, cmap="gray", marker="s")
        path = ax.scatter(*survey["x"][:count].T, c=np.arange(count), s=3, cmap="viridis")
        deep = np.flatnonzero(survey["y"] < DEEP)
        ax.set_title(f"{group}, seed {seed}: basin first sampled at {deep[0] if len(deep) else 'never'}", fontsize=10)
        ax.set_xlabel("x (m)")
        ax.set_aspect("equal")
    axes[0].set_ylabel("y (m)")
    fig.colorbar(path, ax=axes, label="sample index")
    fig.savefig(FIGURE, dpi=80, bbox_inches="tight")
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=Path("runs/fleet-seafloor"), help="a bench fleet --out directory")
    parser.add_argument("--seeds", default="0-4", help="seeds, e.g. 0-4, 0,3 or 0-2,7")
    args = parser.parse_args()
    seeds = parse_seeds(args.seeds)
    ensure_runs(args.runs, seeds)
    text = study(args.runs, seeds)
    (RESULTS / "study_fleet_seafloor.md").write_text(text)
    plot_early(args.runs, seeds[0])
    print(text)


if __name__ == "__main__":
    main()
