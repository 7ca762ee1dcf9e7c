"""Bayesian optimisation with an online GP: BoTorch's qUCB on `onlinegp.botorch.OnlineGPModel`.

The surrogate is updated with each new batch of evaluations in constant time (here WISKI, whose updates are exact;
any registered model works) instead of being refitted from scratch. From 4 random points on the Branin function,
the best value found climbs over the iterations towards the maximum. Needs the `bo` extra: pip install ".[bo]".

Run: python examples/botorch_loop.py  (about 10 s)
"""

import torch
from botorch.acquisition import qUpperConfidenceBound
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from botorch.test_functions import Branin

import onlinegp
from onlinegp.botorch import OnlineGPModel

torch.manual_seed(0)
BRANIN = Branin(negate=True)  # to maximise: three global maxima of -0.3979, many points near -300
BOUNDS = BRANIN.bounds.to(torch.float64)  # [[lower...], [upper...]]


def objective(x: torch.Tensor) -> torch.Tensor:
    """Noisy evaluations of the negated Branin function (noise std 0.05)."""
    return BRANIN(x) + 0.05 * torch.randn(x.shape[:-1], dtype=x.dtype)


gp = onlinegp.WISKI(
    grid_size=16, training=onlinegp.Training(steps=3), x_bounds=BOUNDS
)  # x_bounds fixes the input scaling
X = BOUNDS[0] + (BOUNDS[1] - BOUNDS[0]) * torch.rand(4, 2, dtype=torch.float64)  # a small initial design
Y = objective(X)
gp.update(X, Y)
print(f"initial design, 4 points: best {float(BRANIN(X).max()):+8.3f} (the maximum is {BRANIN.optimal_value:+.3f})")

for it in range(12):
    acqf = qUpperConfidenceBound(OnlineGPModel(gp), beta=2.0, sampler=SobolQMCNormalSampler(torch.Size([64]), seed=it))
    cand, _ = optimize_acqf(acqf, bounds=BOUNDS, q=2, num_restarts=2, raw_samples=64, options={"maxiter": 30})
    y_new = objective(cand)
    gp.update(cand, y_new)  # absorb the new evaluations: no refit
    X, Y = torch.cat([X, cand]), torch.cat([Y, y_new])
    best = int(BRANIN(X).argmax())  # the best point so far, judged by its noise-free value
    print(f"iteration {it:2d}: {len(Y)} points, best {float(BRANIN(X[best])):+8.3f} at {X[best].numpy().round(2)}")
