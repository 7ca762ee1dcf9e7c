"""Replay a robot's recorded survey through several online GPs and compare their maps: which model would have
mapped this survey best, and how fast?

A survey log is a CSV with a header: input columns (any names), a `y` column and a `time` column in seconds (or a
`batch` column). Rows are grouped into one update per `period` seconds, as the robot would have updated its map.
With no ground truth, a random `holdout` fraction of the samples is kept out of the stream for evaluation. The same
runs from the shell: onlinegp replay survey.csv --period 20 --holdout 0.2 --model poam --model ssgp++

Run: python examples/replay_survey.py  (about 15 s; writes the log and the replay to a temporary directory)
"""

import tempfile
from pathlib import Path

import numpy as np

from onlinegp.experiments.replay import run_replay

# 1. a log as a robot would write it: 2 samples a second along a wavy transect, for 4 minutes
rng = np.random.default_rng(0)
t = np.arange(0, 240, 0.5)
east, north = 25 * np.sin(t / 40), -25 + 50 * t / 240 + 3 * np.sin(t / 7)
depth = 20 + 5 * np.sin(east / 9) + 3 * np.cos(north / 6) + 0.2 * rng.standard_normal(t.size)
work = Path(tempfile.mkdtemp(prefix="replay_survey-"))  # the log and the replay's outputs go here
log = work / "survey.csv"
np.savetxt(log, np.column_stack([east, north, depth, t]), delimiter=",", header="east,north,y,time", comments="")

# 2. replay it through two models, one update per 20 s of the log; options go to every model
results = run_replay(
    log,
    ["poam", "ssgp++"],
    out=work / "replay",
    options={"num_inducing": 60, "num_steps": 10},
    period=20.0,
    holdout=0.2,
)
print((work / "replay" / "comparison.md").read_text())
print(f"log and replay written to {work}")
for name, rows in results.items():
    print(f"{name}: {len(rows)} updates, final RMSE {rows[-1]['rmse']:.3f} m")
