"""Gradient steps on hyper-parameters: the optimiser every model builds and the loop every model runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from . import health
from .kernels import MAX_AK_INPUTS
from .linalg import CholeskyError

#: iterations of a fit to convergence (``fit='lbfgs'``) at most
LBFGS_ITERATIONS = 100
#: Adam-stepped methods take this many times their default steps per batch above ``MAX_AK_INPUTS`` inputs
WIDE_STEP_FACTOR = 5


def steps_for_width(steps: int, input_dim: int) -> int:
    """A default number of Adam steps per batch at this input width: ``steps`` up to 3 inputs (the mapping settings
    of Chen et al. 2024 and Bui et al. 2017), ``WIDE_STEP_FACTOR`` times more above, where every input has its own
    length-scale to learn. On pumadyn32nm (32 inputs, 2 relevant; ``onlinegp bench defaults``' protocol) 10 steps of
    rate 1e-2 per batch leave SSGP++ at 1.58x the exact GP's RMSE after 20 batches and POAM at 1.55x; 50 steps bring
    them to 1.11x. Used by SSGP++, POAM and OVC++ (O-SVGP keeps its per-point rule: see its ``num_steps``)."""
    return steps * WIDE_STEP_FACTOR if input_dim > MAX_AK_INPUTS else steps


def hyperparameter_optimizer(
    kernel: nn.Module, likelihood: nn.Module, lr: float = 1e-2, lr_attention: float = 1e-3
) -> torch.optim.Adam:
    """Adam over kernel and noise parameters; an Attentive Kernel's network gets its own rate (Chen et al. 2024,
    §V-A)."""
    attention = [p for n, p in kernel.named_parameters() if ".attention." in f".{n}"]
    others = [p for p in kernel.parameters() if all(p is not a for a in attention)]
    groups = [{"params": others + list(likelihood.parameters()), "lr": lr}]
    if attention:
        groups.append({"params": attention, "lr": lr_attention})
    return torch.optim.Adam(groups)


def gradient_steps(
    optimizers: Sequence[torch.optim.Optimizer],
    objective: Callable[[], Tensor],
    num_steps: int,
    scale: float = 1.0,
    stepped: Sequence[torch.optim.Optimizer] | None = None,
    schedules: Sequence[torch.optim.lr_scheduler.LRScheduler] = (),
) -> float | None:
    """``num_steps`` steps maximising ``objective()``: clear the gradients of every optimiser, back-propagate
    ``-objective() / scale``, step the optimisers in ``stepped`` (default: all), then the learning-rate
    ``schedules``. Returns the last objective value (None when ``num_steps`` is 0)."""
    value = None
    for _ in range(num_steps):
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        current = objective()
        (-current / scale).backward()
        for opt in optimizers if stepped is None else stepped:
            opt.step()
        for schedule in schedules:
            schedule.step()
        value = float(current.detach())
    return value


def lbfgs_fit(
    params: Sequence[Tensor],
    objective: Callable[[], Tensor],
    kernel: nn.Module,
    max_iter: int = LBFGS_ITERATIONS,
    scale: float = 1.0,
) -> float:
    """Maximise ``objective()`` over ``params`` by full-batch L-BFGS (strong-Wolfe line search, history 20) to
    convergence or ``max_iter`` iterations; returns the final objective. A trial point with a length-scale too short to
    evaluate (:func:`~onlinegp.health.lengthscales_usable`) or a failed factorisation counts as +inf loss, so the line
    search backs off. The fit of the exact-GP references and of models refitted to convergence after every update."""
    opt = torch.optim.LBFGS(
        list(params),
        lr=1.0,
        max_iter=max_iter,
        history_size=20,
        tolerance_grad=1e-6,
        tolerance_change=1e-10,
        line_search_fn="strong_wolfe",
    )
    dtype = next(iter(params)).dtype

    def closure() -> Tensor:
        opt.zero_grad(set_to_none=False)
        if not health.lengthscales_usable(kernel):
            return torch.tensor(float("inf"), dtype=dtype)
        try:
            loss = -objective() / scale
        except CholeskyError:
            return torch.tensor(float("inf"), dtype=dtype)
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        return float(objective())
