"""The conformance contract (onlinegp.testing) as a user meets it: a small model of their own passes it, and a model
that breaks it fails the check it breaks."""

import subprocess
import sys

import pytest
import torch

import onlinegp
from onlinegp.kernels import dense, diagonal, make_kernel
from onlinegp.linalg import cholesky, trisolve
from onlinegp.testing import ModelConformance


class WindowGP(onlinegp.OnlineGP):
    """The README's example method: an exact GP on the last ``window`` points (unregistered here)."""

    _dynamic = ("X", "y")

    def __init__(self, input_dim=None, *, window=200, **kwargs):
        super().__init__(input_dim, **kwargs)
        self.window = window

    def _build(self, input_dim):
        super()._build(input_dim)
        self.kernel = make_kernel("rbf", input_dim)
        self.X, self.y = torch.zeros(0, input_dim, dtype=self.dtype), torch.zeros(0, dtype=self.dtype)

    def _update(self, xs, ys, timer):
        self.X, self.y = torch.cat([self.X, xs])[-self.window :], torch.cat([self.y, ys])[-self.window :]

    def _predict(self, xs, full_cov):
        L = cholesky(dense(self.kernel, self.X) + self.noise * torch.eye(len(self.X), dtype=self.dtype))
        w = trisolve(L, dense(self.kernel, self.X, xs))
        cov = dense(self.kernel, xs) - w.mT @ w if full_cov else None
        return w.mT @ trisolve(L, self.y), diagonal(self.kernel, xs) - w.pow(2).sum(0), cov


class TestWindowGP(ModelConformance):
    """What a user writes: pytest runs every check of the contract on their model."""

    def make(self, **kw):
        return WindowGP(window=50, **kw)


class CountsBeforeValidating(WindowGP):
    """Counts a batch's rows before the base class validates it: a refused batch changes the model."""

    def update(self, x, y, noise=None):
        self.num_data += len(x)
        return super().update(x, y, noise)


class ForgetsItsData(WindowGP):
    """Keeps its data outside its checkpoint (no ``_dynamic``): restored and loaded models lose it."""

    _dynamic = ()


class Contract(ModelConformance):
    """The contract over a given class (not collected: its name does not start with Test)."""

    def __init__(self, cls):
        self.cls = cls

    def make(self, **kw):
        return self.cls(window=50, **kw)


def test_a_model_changed_by_a_refused_batch_fails_the_invalid_input_check():
    with pytest.raises(AssertionError):
        Contract(CountsBeforeValidating).test_invalid_input_leaves_the_model_unchanged()
    Contract(WindowGP).test_invalid_input_leaves_the_model_unchanged()


def test_a_model_whose_checkpoint_drops_its_data_fails_the_checkpoint_and_rollback_checks(tmp_path):
    with pytest.raises(AssertionError):
        Contract(ForgetsItsData).test_checkpoint_round_trip_is_exact(tmp_path)
    with pytest.raises(AssertionError):
        Contract(ForgetsItsData).test_failure_inside_an_update_restores_the_model()


def test_a_contract_without_make_says_so():
    with pytest.raises(NotImplementedError, match="make"):
        ModelConformance().test_protocol()


def test_import_onlinegp_leaves_the_contract_and_pytest_out():
    code = "import sys, onlinegp; print(sorted({'onlinegp.testing', 'pytest'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
