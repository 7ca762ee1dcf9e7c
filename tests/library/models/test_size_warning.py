"""No registered model warns "no longer sparse" after a normal first batch: 500 points of a smooth 3-D function, the
model at its default size (M, grid) and with few hyper-parameter steps (the size does not depend on them)."""

import pytest
import torch

from onlinegp import MODELS, health, make_model
from onlinegp.models.registry import model_class
from onlinegp.models.wiski import WISKI
from tests.library.models.test_conformance import OPTIONS

SIZE_OPTIONS = ("num_inducing", "grid_size", "max_local")  # left at the registry's defaults: what a user meets

BATCH = 500


def first_batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.rand(BATCH, 3, generator=g, dtype=torch.float64) * 2 - 1
    y = torch.sin(2 * x[:, 0]) + torch.cos(x[:, 1]) * x[:, 2] + 0.05 * torch.randn(BATCH, generator=g, dtype=x.dtype)
    return x, y


def cheap_options(name: str) -> dict:
    """The conformance suite's cheap steps at the default size, and no pre-training where a model has it."""
    options = {k: v for k, v in OPTIONS.get(name, {}).items() if k not in SIZE_OPTIONS}
    if "pretrain" in getattr(model_class(name), "TRAINING_FIELDS", ()):
        options["training"] = {**options.get("training", {}), "pretrain": {"steps": 0}}
    return options


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_normal_first_batch_raises_no_size_warning(name):
    report = make_model(name, **cheap_options(name)).update(*first_batch())
    assert report.num_data == BATCH
    assert not [w for w in report.warnings if "no longer sparse" in w]


def test_wiski_declares_its_grid_as_its_fixed_size():
    """WISKI's default 3-D grid (1000 points) is larger than a first batch of 500: its grid is declared as a fixed
    size, the bound the size check reads (``selector.num_inducing``), so the check never reports it."""
    model = WISKI(3)
    size = model.num_inducing
    assert model.selector.num_inducing == size == 1000
    assert health.size((None, 0), (size, BATCH), model.selector.num_inducing) == []
    assert WISKI().selector is None  # no grid before the first batch
