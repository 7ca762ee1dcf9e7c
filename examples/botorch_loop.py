"""Bayesian optimisation with an online GP: BoTorch's qUCB on `onlinegp.botorch.OnlineGPModel`.

The surrogate is updated with each new batch of evaluations in constant time (here WISKI, whose updates are exact;
any registered model works) instead of being refitted from scratch. Needs the `bo` extra: pip install ".[bo]".

Run: python examples/botorch_loop.py  (about 15 s)
"""

import torch
from botorch.acquisition import qUpperConfidenceBound
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler

import onlinegp
from onlinegp.botorch import OnlineGPModel

torch.manual_seed(0)
BOUNDS = torch.tensor([[0.0, 0.0], [2.0, 1.0]], dtype=torch.float64)  # [[lower...], [upper...]]


def objective(x: torch.Tensor) -> torch.Tensor:
    """The function to maximise (noisy evaluations); its maximum is 0 at (1.3, 0.4)."""
    return -((x[..., 0] - 1.3) ** 2) - 2 * (x[..., 1] - 0.4) ** 2 + 0.01 * torch.randn(x.shape[:-1], dtype=x.dtype)


gp = onlinegp.WISKI(grid_size=12, num_steps=3, x_bounds=BOUNDS)  # x_bounds fixes the input scaling
X = BOUNDS[0] + (BOUNDS[1] - BOUNDS[0]) * torch.rand(10, 2, dtype=torch.float64)
Y = objective(X)
gp.update(X, Y)  # the initial design
print(f"initial design: best {float(Y.max()):+.4f}")

for it in range(6):
    acqf = qUpperConfidenceBound(OnlineGPModel(gp), beta=1.0, sampler=SobolQMCNormalSampler(torch.Size([64]), seed=it))
    cand, _ = optimize_acqf(acqf, bounds=BOUNDS, q=2, num_restarts=2, raw_samples=32, options={"maxiter": 30})
    y_new = objective(cand)
    gp.update(cand, y_new)  # absorb the new evaluations: no refit
    X, Y = torch.cat([X, cand]), torch.cat([Y, y_new])
    best = int(Y.argmax())
    print(f"iteration {it}: evaluated {len(Y)} points, best {float(Y[best]):+.4f} at {X[best].numpy().round(3)}")

assert float(Y.max()) > -0.1, "the loop should have come close to the maximum"
