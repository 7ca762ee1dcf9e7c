import copy
from collections.abc import Iterator
from pathlib import Path

import pytest

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
