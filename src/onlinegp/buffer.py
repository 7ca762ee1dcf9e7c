"""Storage of every point seen, for the methods whose steps sample from or refit on all data."""

from __future__ import annotations

import torch
from torch import Tensor


class GrowingBuffer:
    """All data seen so far (for methods whose M-step samples from it), with amortised O(1) appends."""

    def __init__(self, dim: int, dtype: torch.dtype, device: torch.device | str | None = None):
        self.X = torch.zeros(0, dim, dtype=dtype, device=device)
        self.y = torch.zeros(0, dtype=dtype, device=device)
        self.n = 0

    def append(self, x: Tensor, y: Tensor) -> None:
        need = self.n + x.shape[0]
        if need > self.X.shape[0]:
            cap = max(need, 2 * self.X.shape[0], 256)
            X = torch.zeros(cap, self.X.shape[1], dtype=self.X.dtype, device=self.X.device)
            Y = torch.zeros(cap, dtype=self.y.dtype, device=self.y.device)
            X[: self.n], Y[: self.n] = self.X[: self.n], self.y[: self.n]
            self.X, self.y = X, Y
        self.X[self.n : need], self.y[self.n : need] = x, y
        self.n = need

    @property
    def data(self) -> tuple[Tensor, Tensor]:
        return self.X[: self.n], self.y[: self.n]

    def state(self) -> dict:
        X, y = self.data
        return {"X": X.clone(), "y": y.clone()}

    def load(self, state: dict) -> None:
        self.X, self.y = state["X"].to(self.X.device, copy=True), state["y"].to(self.y.device, copy=True)
        self.n = self.X.shape[0]
