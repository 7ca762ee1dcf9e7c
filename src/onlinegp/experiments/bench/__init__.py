"""Named experiments reproducing published tables and figures, and the sweep runner they share."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from .runner import RunnerOptions, RunResult, RunSpec, SweepResult, is_finished, run_sweep

if TYPE_CHECKING:
    from .protocol import Bench

__all__ = ["CATALOGUE", "RunSpec", "RunResult", "RunnerOptions", "SweepResult", "is_finished", "run_sweep"]


class Catalogue(Mapping[str, "Bench"]):
    """Every ``onlinegp bench NAME``: name to its :class:`~.protocol.Bench`, the ``BENCHES[NAME]`` of the module that
    holds it, imported when first looked up."""

    def __init__(self, modules: dict[str, str]) -> None:
        self._modules = modules  # bench name: module of this package

    def __getitem__(self, name: str) -> Bench:
        return importlib.import_module(f".{self._modules[name]}", __name__).BENCHES[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)


#: every bench, in the order ``onlinegp bench --help`` lists them
CATALOGUE = Catalogue(
    {
        "wgpr": "wgpr",
        "poam-table1": "poam",
        "poam-ablation": "poam",
        "poam-robustness": "poam",
        "fleet": "fleet",
        "wiski-bo": "wiski",
        "wiski-uci": "wiski",
        "wiski-rank": "wiski",
        "wiski-banana": "wiski",
        "vips-table1": "vips",
        "defaults": "defaults",
        "vips-magnetic": "vips",
        "vips-synthetic": "vips",
    }
)
