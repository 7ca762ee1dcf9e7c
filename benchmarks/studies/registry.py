"""The one-off studies of ``benchmarks/studies/``, declared once: each script with the question it answers, the page
that cites it (a docs page, the README, a docstring) and the result files it wrote (``benchmarks/studies/results/``).

Studies are not timing benchmarks and no runner runs them: each is run by hand with its own options (its docstring
and ``--help``). They import the benches' shared data protocols from :mod:`onlinegp.experiments.protocols` and the
result-file helpers from ``benchmarks/perf/common.py``, never another study. ``benchmarks/README.md`` shows the
table below (``python benchmarks/studies/registry.py``; a test checks that they agree).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Study:
    """``NAME.py`` beside this file: ``question`` (markdown), the page that ``backs`` cites it, its ``results``."""

    name: str
    question: str
    backs: str
    results: tuple[str, ...]

    @property
    def script(self) -> Path:
        return HERE / f"{self.name}.py"


STUDIES: tuple[Study, ...] = (
    Study(
        "study_poam_defaults",
        "the paired studies that chose POAM's missions' initial noise (1.0) and not pre-training on the pilot survey",
        "README (POAM's defaults), `benchmarks/README.md`, `models/poam.py`, `simulator/mission.py`",
        ("poam_defaults_study.json", "poam_defaults_study.md", "poam_pretrain_study.json", "poam_pretrain_study.md"),
    ),
    Study(
        "study_sparse_budget",
        "on the defaults protocol, OSGPR streamed at the exact GP's θ for several M, and the batch sparse GP: whether M "
        "or the streaming θ fit limits a dataset",
        "docs/results/defaults.md",
        ("sparse_budget.json",),
    ),
    Study(
        "study_wide_steps",
        "on the defaults protocol, the Adam-stepped methods with their steps per batch and rate scaled 5x, on a wide "
        "(pumadyn32nm) and a narrow (concrete) set: the study behind `training.steps_for_width`",
        "docs/results/defaults.md",
        ("wide_steps.json",),
    ),
    Study(
        "study_defaults_variants",
        "on the defaults protocol (split 0), one method (`--method wiski`, `wgpr` or `osvgp`) with its defaults and "
        "option variants beside the exact GP and the kept 0.1.0 / 0.4.0 cells: why a defaults cell moved since 0.1.0",
        "docs/results/defaults.md, docs/results/wiski.md, `models/wiski.py`",
        ("study_*_defaults.json", "study_*_defaults_060.json"),
    ),
    Study(
        "study_fit_inducing",
        "where OSGPR fits θ once M is at its cap (the selected Z' or their union with the old ones) and at which noise "
        "the old data are charged: the study behind OSGPR's `fit_inducing` and `old_noise` defaults",
        "`models/osgpr.py`, docs/results/defaults.md",
        ("fit_inducing.json", "fit_inducing_*.json"),
    ),
    Study(
        "study_seed_spread",
        "how far one recorded POAM stream's final SMSE moves with the model's seed alone, ours and the paper's code",
        "docs/results/poam-table1.md, README",
        ("seed_spread.json",),
    ),
    Study(
        "study_online_elbo",
        "POAM against its ONLINE-ELBO ablation on identical samples (the recorded streams) and on crossed missions, "
        "with variants that separate the M-step's data from its bound",
        "docs/results/poam-ablation.md",
        ("study_online_elbo.json", "study_online_elbo_missions.json"),
    ),
    Study(
        "profile_wgpr",
        "the WGPR bench's kin40k job cut to `--points` rows: training time of LGPR, WGPR, SOLAR-GP and OVFE and its "
        "ratio to LGPR's (wall and CPU), WGPR's phases, L-BFGS evaluations per fit, RMSE, each speed lever beside its "
        "method's plain run (`--render` writes docs/results/wgpr-profile.md)",
        "docs/results/wgpr-profile.md, docs/results/wgpr.md",
        ("profile_wgpr.json",),
    ),
    Study(
        "study_wgpr_toy_inducing",
        "toy WGPR with moved and fixed pseudo-inputs, its members against its nearest-pseudo-input routing",
        "docs/results/wgpr.md",
        ("study_wgpr_toy_inducing.md",),
    ),
    Study(
        "study_wgpr_members",
        "which OSGPR member fit (θ at the selected or the union pseudo-inputs or checked, old data at their own or the "
        "current noise, settled or the whole budget) keeps WGPR stable on the lake stand-in and level with 0.1.0 on "
        "the UCI defaults cells (resumable)",
        "docs/results/wgpr-members.md",
        ("study_wgpr_members.json",),
    ),
    Study(
        "study_wgpr_distant",
        "where WGPR's members drop pseudo-inputs (covered by the batch or not) and what fitting θ with only the "
        "uncovered ones costs in L-BFGS evaluations",
        "docs/results/wgpr.md, `models/osgpr.py`",
        ("study_wgpr_distant.json",),
    ),
    Study(
        "study_wgpr_kept",
        "how often WGPR's members keep their pseudo-inputs over a new pivoted selection (the higher online bound) and "
        "what it saves in L-BFGS evaluations per fit, on kin40k, the lake stand-in, bike and skillcraft",
        "docs/results/wgpr.md, `inducing.py`",
        ("study_wgpr_kept.json",),
    ),
    Study(
        "study_lgpr_kin40k",
        "why LGPR's kin40k cell sits above the paper's: the bench's kin40k job with LGPR's settings varied one at a "
        "time",
        "docs/results/wgpr.md",
        ("study_lgpr_kin40k.json", "study_lgpr_kin40k.md"),
    ),
    Study(
        "study_vips_upper_gap",
        "why VIPS grew on elevators until 0.7.0: the gap between Û and L* over the greedy set",
        "docs/results/vips.md, `inducing.py`",
        ("study_vips_upper_gap.md",),
    ),
    Study(
        "study_vehicle_order",
        "a vehicle's stream as it comes (a first batch covering a corner) against the same models given the whole "
        "area in hindsight (`--render` writes docs/results/vehicle-order.md)",
        "docs/results/vehicle-order.md, `kernels/__init__.py`",
        ("vehicle_order.json",),
    ),
    Study(
        "study_fleet_seafloor",
        "why four vehicles end behind one on seafloor: when the basin is found, coverage, the exact GP of each "
        "mission's samples under either θ",
        "docs/results/fleet.md",
        ("study_fleet_seafloor.md",),
    ),
    Study(
        "study_wiski_bo_kernel",
        "WISKI fitted by L-BFGS in the paper's BO runs, our ARD RBF against the authors' Matérn with priors: which "
        "runs' health checks warn, the shortest length-scale and noise",
        "docs/results/wiski.md",
        ("study_wiski_bo_kernel.md",),
    ),
    Study(
        "fleet_sign_test",
        "the fleet's joint against independent goals pooled over the kept sweeps of every terrain",
        "docs/results/fleet.md",
        ("fleet_sign_test.md",),
    ),
)

#: result files no script here writes: records of sweeps (``onlinegp bench fleet``) and of interrupted runs that the
#: docs cite, by the page that cites them
RECORDS: dict[str, str] = {
    "fleet_small.md": "docs/results/fleet.md",
    "fleet_small_runs.csv": "docs/results/fleet.md",
    "fleet_schedule.md": "docs/results/fleet.md, `simulator/fleet.py`",
    "fleet_schedule_runs.csv": "docs/results/fleet.md",
    "fleet_schedule_paired.csv": "docs/results/fleet.md",
    "fleet_decentralised.md": "docs/results/fleet.md, `simulator/merge.py`",
    "vips_elevators_split0_interrupted.csv": "docs/results/vips.md",
    "vips_elevators_fileorder_interrupted.csv": "docs/results/vips.md",
}


def markdown_table() -> str:
    """The table of studies (benchmarks/README.md)."""
    lines = ["| study | its question | the page it backs | results (`studies/results/`) |", "| --- | --- | --- | --- |"]
    for s in STUDIES:
        lines.append(f"| `{s.name}.py` | {s.question} | {s.backs} | {', '.join(f'`{r}`' for r in s.results)} |")
    for name, page in RECORDS.items():
        lines.append(f"| – (a kept record) | | {page} | `{name}` |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")
