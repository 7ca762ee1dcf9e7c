"""The numbers that must not depend on the CPU: run as ``python -m tests.library.portable_probe`` (from the checkout's root)
by tests/library/test_portable.py, under forced dispatches, with and without ``ONLINEGP_PORTABLE``.

Prints one JSON object: the small mission's rows (samples, SMSE, MSLL as ``repr``) and, for every registered model,
the ``repr`` of its predictive mean and variance sums after three small batches of the conformance suite's stream.
``--models NAME,...`` limits the models; ``--no-mission`` leaves the mission out.
"""

import argparse
import json
import tempfile

import onlinegp
from onlinegp.experiments.simulator.mission import MissionConfig
from onlinegp.experiments.simulator.run import run_mission
from onlinegp.kernels import native

#: a small mission (issue 52's table; tests/experiments/simulator/test_fleet.py runs it too)
SMALL = {"budget": 900, "num_inducing": 40, "num_steps": 2, "seed": 3, "num_candidates": 300}


def mission_rows() -> list[list]:
    with tempfile.TemporaryDirectory() as out:
        rows = run_mission(MissionConfig(**SMALL), out, quiet=True).rows
    return [[r["num_samples"], repr(r["smse"]), repr(r["msll"])] for r in rows]


def model_sums(names: list[str]) -> dict[str, list[str]]:
    from tests.library.models.test_conformance import BATCHES, XS, build

    sums = {}
    for name in names:
        model = build(name)
        for x, y in BATCHES[:3]:
            model.update(x, y)
        prediction = model.predict(XS)
        sums[name] = [repr(prediction.mean.sum().item()), repr(prediction.variance.sum().item())]
    return sums


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default=",".join(sorted(onlinegp.MODELS)))
    parser.add_argument("--no-mission", action="store_true")
    args = parser.parse_args()
    print(
        json.dumps(
            {
                "numerics": native.numerics(),
                "mission": None if args.no_mission else mission_rows(),
                "models": model_sums([n for n in args.models.split(",") if n]),
            }
        )
    )


if __name__ == "__main__":
    main()
