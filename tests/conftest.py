import copy
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

SHARED = Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture(autouse=True)
def _results_tree(tmp_path_factory, monkeypatch) -> None:
    """`onlinegp bench` keeps run summaries in the checkout's results/ by default: tests keep theirs apart."""
    monkeypatch.setenv("ONLINEGP_RESULTS", str(tmp_path_factory.mktemp("results")))
    # the suite runs in checkouts with uncommitted edits too: sweeps under test keep their runs whatever the tree
    # (experiments/bench/test_runner.py tests the refusal itself)
    monkeypatch.setattr("onlinegp.experiments.bench.runner.is_dirty", lambda code: False)


@pytest.fixture
def shared_data() -> Path:
    """The repo's ../shared/data; tests using it skip cleanly on a user's fresh clone."""
    path = SHARED / "data"
    if not path.is_dir():
        pytest.skip("../shared/data is not present (only developers and CI have it)")
    return path


def state_equal(a, b) -> bool:
    """Deep equality of (nested) state dicts holding tensors."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(state_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(state_equal(x, y) for x, y in zip(a, b))
    if hasattr(a, "__dataclass_fields__"):
        return type(a) is type(b) and all(state_equal(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)
    return a == b


def update_failing_after_mutation(model, X, y) -> None:
    """``model.update(X, y)`` with ``_update`` run to the end (mutating the model) and then raising; the caller checks
    that the model was restored."""
    real = model._update

    def fail_after_mutating(*args, **kwargs):
        real(*args, **kwargs)
        raise RuntimeError("simulated failure after a partial update")

    model._update = fail_after_mutating
    try:
        with pytest.raises(RuntimeError, match="simulated"):
            model.update(X, y)
    finally:
        del model._update


@pytest.fixture
def snapshot():
    return lambda model: copy.deepcopy(model.state_dict())


@pytest.fixture(params=["native", "torch"])
def ak_backend(request) -> Iterator[str]:
    """Runs a test with the Attentive Kernel's compiled routine and again with its PyTorch path."""
    from onlinegp import settings
    from onlinegp.kernels import native

    native_on = request.param == "native"
    if native_on and native.library() is None:
        pytest.skip("no C compiler: the native Attentive Kernel is unavailable")
    with settings.native_kernel(native_on):
        yield request.param
