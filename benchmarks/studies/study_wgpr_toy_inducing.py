"""Why toy WGPR maps worse with its pseudo-inputs moved, as the paper moves them (issue 33, item 1).

On the two-regime toy of Kepler et al. 2021 (Fig. 1; ``onlinegp bench wgpr --datasets toy --sweep ""``) WGPR's RMSE
is higher when every member's pseudo-inputs move with θ by L-BFGS (the paper's §II-B, the bench's default) than
when they stay where the pivoted-Cholesky selection put them (``--fixed-inducing``). This study reruns the bench's
WGPR runs of both kinds (the same data, model and settings: ``onlinegp.experiments.bench.wgpr``), records which batches
each member absorbed, and measures at the end, per trial:

* **stranded pseudo-inputs**: those farther than one batch's width (the stream is sorted by x: 10 x-units) from
  every input their member absorbed, where its bound no longer depends on them;
* **test inputs routed away from the data**: prediction takes the member with the nearest pseudo-input (§III-B);
  a test input whose member absorbed no input within one batch's width of it is predicted by a member that knows
  nothing there (a stranded pseudo-input does that, or one moved into another member's region); their share and
  RMSE against the noise-free f, and the rest's;
* **run-away members**: a member whose length-scale exceeds 10 scaled half-ranges (a constant predictor);
* **the members against the routing**: the RMSE against f had every test input been predicted by the member whose
  mean is closest to f there (an oracle, biased low for both kinds alike): if it is level between fixed and moved
  pseudo-inputs, the members map as well and the loss is in which member predicts where.

    OMP_NUM_THREADS=1 python benchmarks/studies/study_wgpr_toy_inducing.py [--seeds 0-4]

writes ``benchmarks/studies/results/study_wgpr_toy_inducing.md``.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import torch

from onlinegp.experiments.bench.parse import parse_seeds
from onlinegp.experiments.bench.runner import code_version
from onlinegp.experiments.protocols import load_stream, two_regime_toy, wgpr_model
from onlinegp.metrics import rmse

RESULTS = Path(__file__).resolve().parent / "results"
BATCH = 100
STRANDED = 10.0  # x-units: one batch's width in the sorted toy stream (3000 points on [0, 300])
RUN_AWAY = 10.0  # scaled half-ranges


def trial(seed: int, moved: bool) -> dict:
    """One bench run of WGPR (ε = 1, the toy's default) with the members' absorbed inputs tracked."""
    torch.manual_seed(seed)
    train, test = load_stream("toy", 3000, 10**9, seed)
    _, noise_free = two_regime_toy(n_train=3000, seed=seed)
    x_bounds = np.stack([train.X.min(0), train.X.max(0)])
    y_stats = (float(train.y.mean()), float(train.y.std()))
    model = wgpr_model("wgpr", 1, {"epsilon": 1.0}, x_bounds, y_stats, seed, None, moved)
    absorbed: list[np.ndarray] = []
    for idx in np.array_split(np.arange(len(train)), math.ceil(len(train) / BATCH)):
        chosen = model.update(train.X[idx], train.y[idx]).extra["chosen"]
        if chosen == len(absorbed):
            absorbed.append(train.X[idx].ravel())
        else:
            absorbed[chosen] = np.concatenate([absorbed[chosen], train.X[idx].ravel()])
    x = noise_free.X
    f = np.asarray(noise_free.meta["f"]).ravel()
    mean = np.asarray(model.predict(x).mean).ravel()
    # the routing pseudo-input of every test input, and whether it is stranded
    pseudo = [model.scaler.x_inverse(model.inducing_of(m)).numpy().ravel() for m in model.members]
    owner = np.concatenate([np.full(len(z), j) for j, z in enumerate(pseudo)])
    flat = np.concatenate(pseudo)
    stranded_z = np.array([np.abs(absorbed[j] - z).min() > STRANDED for j, z in zip(owner, flat)])
    member = owner[np.abs(x.ravel()[:, None] - flat[None, :]).argmin(1)]
    away = np.array([np.abs(absorbed[j] - q).min() > STRANDED for j, q in zip(member, x.ravel())])
    error = (mean - f) ** 2
    with torch.no_grad():
        scaled = model.scaler.x(torch.as_tensor(x))
        each = np.stack([model.scaler.y_inverse_mean(m.predict(scaled).mean).numpy().ravel() for m in model.members])
    oracle = ((each - f) ** 2).min(0)
    lengthscales = [float(m.kernel.base_kernel.lengthscale.max()) for m in model.members]
    return {
        "rmse": rmse(test.y, model.predict(test.X).mean),
        "models": model.num_models,
        "run_away": sum(ls > RUN_AWAY for ls in lengthscales),
        "stranded": int(stranded_z.sum()),
        "pseudo": len(flat),
        "routed": float(away.mean()),
        "rmse_f_routed": float(np.sqrt(error[away].mean())) if away.any() else float("nan"),
        "rmse_f_rest": float(np.sqrt(error[~away].mean())),
        "rmse_f": float(np.sqrt(error.mean())),
        "rmse_f_oracle": float(np.sqrt(oracle.mean())),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0-4", help="trials, e.g. 0-4, 0,3 or 0-2,7")
    args = parser.parse_args()
    seeds = parse_seeds(args.seeds)
    lines = [
        "# Toy WGPR with moved and fixed pseudo-inputs",
        "",
        f"`OMP_NUM_THREADS=1 python benchmarks/studies/study_wgpr_toy_inducing.py --seeds {args.seeds}` ({code_version()}). "
        f"Stranded: a pseudo-input farther than {STRANDED:g} x-units from every input its member absorbed; routed away "
        f"from the data: a test input whose predicting member absorbed no input within {STRANDED:g} x-units; run-away: a "
        f"member's length-scale above {RUN_AWAY:g} scaled half-ranges; RMSE f: against the noise-free function on the "
        "toy's test inputs.",
        "",
        "| Pseudo-inputs | Trial | RMSE | Members | Run-away members | Stranded pseudo-inputs | Test inputs routed "
        "away from the data | RMSE f there | RMSE f elsewhere | RMSE f | RMSE f, oracle routing |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for moved in (False, True):
        rows = []
        for seed in seeds:
            r = trial(seed, moved)
            rows.append(r)
            lines.append(
                f"| {'moved' if moved else 'fixed'} | {seed} | {r['rmse']:.3f} | {r['models']} | {r['run_away']} | "
                f"{r['stranded']} of {r['pseudo']} | {r['routed']:.1%} | {r['rmse_f_routed']:.3f} | "
                f"{r['rmse_f_rest']:.3f} | {r['rmse_f']:.3f} | {r['rmse_f_oracle']:.3f} |"
            )
            print(lines[-1], flush=True)
        lines.append(
            f"| {'moved' if moved else 'fixed'} | mean | {np.mean([r['rmse'] for r in rows]):.3f} | | | | "
            f"{np.mean([r['routed'] for r in rows]):.1%} | | | {np.mean([r['rmse_f'] for r in rows]):.3f} | "
            f"{np.mean([r['rmse_f_oracle'] for r in rows]):.3f} |"
        )
    (RESULTS / "study_wgpr_toy_inducing.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
