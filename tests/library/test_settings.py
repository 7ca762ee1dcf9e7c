"""onlinegp.settings: each setting takes effect inside its block and is restored on exit, also on an exception."""

import pytest
import torch

from onlinegp import settings
from onlinegp.kernels import native
from onlinegp.linalg import MAX_JITTER, CholeskyError, cholesky
from onlinegp.posterior import QUADRATIC_MAX_COND, Predictor

D = torch.float64
CHANGED = [
    (settings.native_kernel, False),
    (settings.native_thread_work, 1),
    (settings.quadratic_max_cond, 1e3),
    (settings.max_jitter, 1e-4),
]


def test_defaults_are_the_module_constants(monkeypatch):
    assert settings.max_jitter.value() == MAX_JITTER
    assert settings.quadratic_max_cond.value() == QUADRATIC_MAX_COND
    assert settings.native_thread_work.value() == native.THREAD_WORK
    monkeypatch.setenv("ONLINEGP_NATIVE", "0")
    assert settings.native_kernel.value() is False
    monkeypatch.setenv("ONLINEGP_NATIVE", "1")
    assert settings.native_kernel.value() is True


@pytest.mark.parametrize("setting, value", CHANGED, ids=lambda s: getattr(s, "__name__", ""))
def test_a_block_changes_the_value_and_restores_it(setting, value):
    before = setting.value()
    with setting(value):
        assert setting.value() == value
        with setting(before):  # nested blocks restore the enclosing value
            assert setting.value() == before
        assert setting.value() == value
    assert setting.value() == before
    with pytest.raises(RuntimeError, match="inside"):
        with setting(value):
            raise RuntimeError("raised inside the block")
    assert setting.value() == before


@pytest.mark.parametrize("setting, value", CHANGED, ids=lambda s: getattr(s, "__name__", ""))
def test_set_lasts_until_reset(setting, value):
    before = setting.value()
    try:
        setting.set(value)
        assert setting.value() == value
        with setting(before):
            assert setting.value() == before
        assert setting.value() == value
    finally:
        setting.reset()
    assert setting.value() == before


@pytest.mark.parametrize(
    "setting, value",
    [
        (settings.native_kernel, 0),
        (settings.native_kernel, "no"),
        (settings.native_thread_work, 0),
        (settings.native_thread_work, 2.5),
        (settings.quadratic_max_cond, -1.0),
        (settings.quadratic_max_cond, "big"),
        (settings.max_jitter, 0.0),
        (settings.max_jitter, float("nan")),
        (settings.max_jitter, True),
    ],
)
def test_invalid_values_are_refused(setting, value):
    with pytest.raises(ValueError, match=setting.__name__):
        setting(value)
    with pytest.raises(ValueError, match=setting.__name__):
        setting.set(value)


def test_max_jitter_bounds_the_cholesky_jitter():
    A = torch.diag(torch.tensor([1.0, 1.0, -1e-3], dtype=D))  # needs relative jitter 1e-2 (times the mean diagonal)
    cholesky(A)
    with settings.max_jitter(1e-3), pytest.raises(CholeskyError, match="1e-03|0.001"):
        cholesky(A)
    assert cholesky(A, max_jitter=1e-2) is not None  # an explicit argument wins over the setting


def test_quadratic_max_cond_selects_the_solve_form():
    torch.manual_seed(0)
    Z = torch.rand(4, 2, dtype=D)
    Lu = torch.linalg.cholesky(torch.diag(torch.tensor([1.0, 2.0, 5.0, 10.0], dtype=D)))
    g, G = torch.randn(4, dtype=D), torch.randn(4, 4, dtype=D).tril()
    assert isinstance(Predictor(Z, Lu, g, G).quadratic(), tuple)
    with settings.quadratic_max_cond(2.0):  # cond(K_uu) = 10 here
        assert Predictor(Z, Lu, g, G).quadratic() is False


def test_native_kernel_switches_to_the_torch_path():
    x = torch.rand(5, 2, dtype=D)
    with settings.native_kernel(False):
        assert native.library() is None and not native.usable(x)
    if native.library() is None:
        pytest.skip("no C compiler: the native Attentive Kernel is unavailable")
    assert native.usable(x)


def test_native_thread_work_sets_how_rows_are_split(monkeypatch):
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    assert len(native._row_ranges(100, 100, 10, False)) == 1  # 10⁵ exponentials: below the default
    with settings.native_thread_work(1):
        assert len(native._row_ranges(100, 100, 10, False)) == 4
