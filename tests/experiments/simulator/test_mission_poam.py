"""POAM along a mission: the projected data-dependent terms follow the hyper-parameters (paper 000, Eqs. 16-21).

Old terms are expressed under the θ they were formed with; P = K'_zz⁻¹ K_zz' (K' under that θ, K under the
current θ) maps them to the current θ. Projecting with the current θ on both sides lets the stored terms drift
away from the all-data terms as the M-step moves θ (relative error ~0.5 after ten epochs here), and the mission's
SMSE then degrades towards 1.
"""

import numpy as np
import torch

from onlinegp.experiments.simulator.fields import bundled
from onlinegp.experiments.simulator.planners import bezier_pilot
from onlinegp.experiments.simulator.robot import DiffDrive, PointSensor
from onlinegp.kernels import dense
from onlinegp.models.registry import make_model


def test_online_terms_track_all_data_terms_while_hyperparameters_move():
    field, sensor, rng = bundled("valley-ridges"), PointSensor(), np.random.default_rng(0)
    robot = DiffDrive(30.0, -30.0, -np.pi)
    torch.manual_seed(0)
    model = make_model("poam", 2, num_inducing=150, num_steps=10, x_bounds=[[-30, -30], [30, 30]], seed=0)
    legs = [bezier_pilot()] + [rng.uniform(-30, 30, (1, 2)) for _ in range(12)]
    errors = []
    for goals in legs:
        xy = robot.drive(goals, 10**9)
        model.update(torch.from_numpy(xy), torch.from_numpy(sensor.measure(field, xy, rng)))
        with torch.no_grad():
            X, y = model.data.data
            K = dense(model.kernel, model.Z, X)
            a, B = K @ y, K @ K.mT
            errors.append(max(float((model.a - a).norm() / a.norm()), float((model.B - B).norm() / B.norm())))
    assert model.num_inducing == 150
    assert max(errors) < 0.2, errors
