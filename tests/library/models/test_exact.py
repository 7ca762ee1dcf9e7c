"""The exact GP's fit to convergence (``training={'optimizer': 'lbfgs'}``) against the exact-GP reference fit."""

import numpy as np
import torch

from onlinegp.experiments.protocols import lbfgs_exact_gp
from onlinegp.models import make_model
from onlinegp.training import LBFGS_ITERATIONS


def test_lbfgs_fit_is_the_exact_gp_reference_fit():
    """training={'optimizer': 'lbfgs'} after absorbing a batch is the L-BFGS fit of the exact-GP references
    (lbfgs_exact_gp) on the same data from the same start: the same θ."""
    g = np.random.default_rng(1)
    X = g.uniform(-1, 1, (80, 2))
    y = np.sin(3 * X[:, 0]) + 0.1 * g.standard_normal(80)
    options = {"x_bounds": np.array([[-1.0, -1.0], [1.0, 1.0]]), "y_stats": (0.0, 1.0)}
    online = make_model("exact", 2, training={"optimizer": "lbfgs"}, **options)
    online.update(X, y)
    reference = make_model("exact", 2, num_steps=0, **options)
    lbfgs_exact_gp(reference, X, y, max_iter=LBFGS_ITERATIONS)
    for a, b in zip(online.parameters(), reference.parameters(), strict=True):
        assert torch.allclose(a, b, rtol=1e-8, atol=1e-10)
