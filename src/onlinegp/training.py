"""Gradient steps on hyper-parameters: the optimiser every model builds and the loop every model runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn


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
) -> float | None:
    """``num_steps`` steps maximising ``objective()``: clear the gradients of every optimiser, back-propagate
    ``-objective() / scale``, step the optimisers in ``stepped`` (default: all). Returns the last objective value
    (None when ``num_steps`` is 0)."""
    value = None
    for _ in range(num_steps):
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        current = objective()
        (-current / scale).backward()
        for opt in optimizers if stepped is None else stepped:
            opt.step()
        value = float(current.detach())
    return value
