"""The fleet's joint goals against independent ones over every terrain (issue 34): one sign test pooling the pairs of
several kept sweeps.

Each sweep is a ``onlinegp bench fleet`` command with the version whose kept runs it reads, as in a results page's
report block; its paired comparisons are regenerated from ``results/`` alone (nothing runs) and the pairs of one
comparison (by default K = 4, joint against independent goals with asynchronous replanning: the averaged SMSE,
paired by terrain and seed) are pooled. Each pair lies within one sweep, so within one version.

    python benchmarks/studies/fleet_sign_test.py [--comparison "joint vs independent (async)"] [--robots 4]

writes ``benchmarks/studies/results/fleet_sign_test.md``.
"""

from __future__ import annotations

import argparse
import csv
import io
from pathlib import Path

from onlinegp.experiments.bench.report import Block, regenerate
from onlinegp.experiments.bench.runner import default_results_root
from onlinegp.experiments.cli import invoke
from onlinegp.experiments.protocols import sign_test

RESULTS = Path(__file__).resolve().parent / "results"
#: (command, version): the paper's two terrains and the five bundled ones, each complete for K = 1 and 4
SWEEPS = (
    (
        "onlinegp bench fleet --envs paper-env2,paper-env3 --robots 1,4 --coordinations joint,independent "
        "--fleets shared --seeds 0-4",
        "0.4.0",
    ),
    (
        "onlinegp bench fleet --envs valley-ridges,dissected-ridges,plateau,coast,seafloor --robots 1,4 "
        "--coordinations joint,independent --fleets shared --seeds 0-4",
        "0.6.0",
    ),
)


def pooled(comparison: str, robots: int, sweeps=SWEEPS) -> str:
    lines = [
        f"K = {robots}, {comparison}: averaged SMSE, paired by terrain and seed (better: the first is lower)",
        "",
        "| Sweep | Version | Better | Worse | Ties | Sign test p |",
        "|---|---|---|---|---|---|",
    ]
    totals = [0, 0, 0]
    for command, version in sweeps:
        block = Block(Path("fleet_sign_test"), command, "paired.csv", version, "")
        text = regenerate(block, default_results_root(), invoke)
        (row,) = [
            r for r in csv.DictReader(io.StringIO(text)) if r["comparison"] == comparison and int(r["robots"]) == robots
        ]
        counts = [int(row[k]) for k in ("wins", "losses", "ties")]
        totals = [t + c for t, c in zip(totals, counts)]
        envs = command.split("--envs ")[1].split()[0]
        lines.append(
            f"| {envs} | {version} | {counts[0]} | {counts[1]} | {counts[2]} | {float(row['sign_test_p']):.3g} |"
        )
    lines.append(f"| **all** | | {totals[0]} | {totals[1]} | {totals[2]} | {sign_test(totals[0], totals[1]):.3g} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--comparison", default="joint vs independent (async)")
    parser.add_argument("--robots", type=int, default=4)
    args = parser.parse_args()
    table = pooled(args.comparison, args.robots)
    (RESULTS / "fleet_sign_test.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
