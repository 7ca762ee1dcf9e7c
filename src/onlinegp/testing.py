"""The conformance contract of an online GP, for the tests of a model of your own.

Every registered model passes the checks of [`ModelConformance`][onlinegp.testing.ModelConformance]. Subclass it in
your test file, in a class whose name starts with ``Test``, and say how to build your model; pytest then runs them:

```python
from onlinegp.testing import ModelConformance


class TestWindowGP(ModelConformance):
    def make(self, **kw):
        return WindowGP(window=50, **kw)
```

The module needs pytest (the ``test`` extra): only tests import it, ``import onlinegp`` does not.
"""

import copy
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor

from onlinegp.base import OnlineGP, Prediction, UpdateReport

Batch = tuple[Tensor, Tensor]


def toy(n: int = 300, seed: int = 0) -> Batch:
    """A seeded 2-D toy data set (float64): ``n`` inputs uniform on [-2, 2]², targets sin(2 x₁) cos(x₂) plus noise of
    standard deviation 0.1."""
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, dtype=torch.float64, generator=g) * 4 - 2
    y = torch.sin(2 * X[:, 0]) * torch.cos(X[:, 1]) + 0.1 * torch.randn(n, dtype=torch.float64, generator=g)
    return X, y


def state_equal(a: Any, b: Any) -> bool:
    """Deep equality of (nested) state dicts holding tensors: same keys, types, shapes, dtypes and bits."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(state_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(state_equal(x, y) for x, y in zip(a, b))
    if hasattr(a, "__dataclass_fields__"):
        return type(a) is type(b) and all(state_equal(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)
    return a == b


def update_failing_after_mutation(model: OnlineGP, X: Any, y: Any) -> None:
    """``model.update(X, y)`` with ``_update`` run to the end (mutating the model) and then raising; the caller checks
    that the model was restored."""
    real = model._update

    def fail_after_mutating(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)
        raise RuntimeError("simulated failure after a partial update")

    model._update = fail_after_mutating
    try:
        with pytest.raises(RuntimeError, match="simulated"):
            model.update(X, y)
    finally:
        del model._update


def with_nan(t: Tensor, index: tuple[int, ...]) -> Tensor:
    """A copy of ``t`` with a NaN at ``index``."""
    t = t.clone()
    t[index] = float("nan")
    return t


def invalid_inputs(x: Tensor, y: Tensor) -> list[tuple[Any, Any, str, bool]]:
    """Invalid batches made from the first five rows of a valid one: ``(x, y, what the ValueError says, whether x is
    the invalid part)``."""
    x, y = x[:5], y[:5]
    bad_x = [
        (with_nan(x, (2, -1)), "NaN"),
        (torch.zeros(5, x.shape[1] + 1, dtype=x.dtype), "columns"),
        (x[:, None], "2-D"),
        (x[:0], "empty"),
        ("garbage", "numeric"),
        ({"a": 1}, "numeric"),
    ]
    bad_y = [
        (with_nan(y, (3,)), "NaN"),
        (torch.full((5,), float("inf"), dtype=x.dtype), "NaN or inf"),
        (y[:4], "rows"),
        (x, "1-D"),
    ]
    return [(bad, y, message, True) for bad, message in bad_x] + [(x, bad, message, False) for bad, message in bad_y]


def assert_same_report(a: UpdateReport, b: UpdateReport) -> None:
    """Equal sizes, objective, jitter and extra entries of two update reports."""
    assert (a.num_data, a.num_inducing, a.objective, a.jitter) == (b.num_data, b.num_inducing, b.objective, b.jitter)
    assert state_equal(a.extra, b.extra)


def assert_same_model(a: OnlineGP, b: OnlineGP, xs: Tensor) -> None:
    """Bit-equal state, and bit-equal predictions at ``xs`` once the models have seen data."""
    assert a.input_dim == b.input_dim
    assert state_equal(a.state_dict(), b.state_dict())
    if a.num_updates:
        pa, pb = a.predict(xs, full_cov=True), b.predict(xs, full_cov=True)
        for key in ("mean", "var_f", "var_y", "cov_f"):
            assert torch.equal(getattr(pa, key), getattr(pb, key)), key


def assert_same_next_update(a: OnlineGP, b: OnlineGP, batch: Batch, xs: Tensor) -> None:
    """Both models absorb ``batch`` identically (a first batch builds the kernel, its initial weights drawn from the
    model's seed)."""
    ra = a.update(*batch)
    rb = b.update(*batch)
    assert_same_report(ra, rb)
    assert_same_model(a, b, xs)


class ModelConformance:
    """The checks every registered model passes, for a model of your own.

    Subclass it in a class named ``Test...`` and define [`make`][onlinegp.testing.ModelConformance.make]; override
    [`batches`][onlinegp.testing.ModelConformance.batches] and
    [`prediction_inputs`][onlinegp.testing.ModelConformance.prediction_inputs] to stream data of your own, and set
    ``single_kernel = False`` for a model without one kernel (an ensemble). Each ``test_*`` method is one check; it
    raises AssertionError (or the error the model raised) when the model breaks the contract.
    """

    #: whether the model has one kernel, whose length-scales ``lengthscale_map`` maps
    single_kernel: bool = True

    def make(self, **kw: Any) -> OnlineGP:
        """A new model with the options under test; ``kw`` (``input_dim``) go to its constructor."""
        raise NotImplementedError(f"{type(self).__name__} says how to build its model: define make(self, **kw)")

    def batches(self) -> list[Batch]:
        """The stream the checks feed: three batches or more of at least five rows, in the model's dtype; by default
        four 40-row batches of [`toy`][onlinegp.testing.toy]."""
        X, y = toy(160, seed=11)
        return [(X[i : i + 40], y[i : i + 40]) for i in range(0, 160, 40)]

    def prediction_inputs(self) -> Tensor:
        """Where the checks predict."""
        return toy(12, seed=12)[0]

    def fed(self, batches: int) -> OnlineGP:
        """A new model that has absorbed the first ``batches`` batches."""
        model = self.make()
        for x, y in self.batches()[:batches]:
            model.update(x, y)
        return model

    def test_protocol(self) -> None:
        """The input width is fixed by the first batch, no prediction comes before it; each batch gives an
        UpdateReport; predictions are finite, with non-negative variances and a full covariance that agrees."""
        stream, xs = self.batches(), self.prediction_inputs()
        width, dtype = stream[0][0].shape[1], stream[0][0].dtype
        model = self.make()
        assert model.input_dim is None and model.num_updates == 0
        with pytest.raises(RuntimeError, match="update"):
            model.predict(xs)
        assert self.make(input_dim=width).input_dim == width
        seen = 0
        for t, (x, y) in enumerate(stream[:2], 1):
            report = model.update(x, y)
            seen += len(x)
            assert isinstance(report, UpdateReport) and report.num_data == seen and model.num_updates == t
            assert all(s >= 0 for s in report.timings.values()) and report.jitter >= 0
        assert model.input_dim == width
        pred, full = model.predict(xs), model.predict(xs, full_cov=True)
        assert isinstance(pred, Prediction) and pred.cov_f is None
        assert pred.mean.shape == pred.var_f.shape == pred.var_y.shape == (len(xs),)
        assert torch.isfinite(pred.mean).all() and (pred.var_f >= 0).all() and (pred.var_y >= pred.var_f).all()
        assert full.cov_f.shape == (len(xs), len(xs))
        assert torch.allclose(full.cov_f.diagonal(), full.var_f, atol=1e-8)
        assert torch.allclose(full.mean, pred.mean, atol=1e-10) and torch.allclose(full.var_f, pred.var_f, atol=1e-8)
        assert torch.isfinite(model.predict(xs.numpy()).mean).all()  # numpy input too
        with pytest.raises(ValueError, match="columns"):  # the width is fixed by the first batch
            model.update(torch.zeros(4, width + 1, dtype=dtype), torch.zeros(4, dtype=dtype))

    def test_lengthscale_map(self) -> None:
        """Positive, finite length-scales at valid inputs, a ValueError at invalid ones; without a single kernel, a
        ValueError saying so."""
        model, xs = self.fed(1), self.prediction_inputs()
        if not self.single_kernel:
            with pytest.raises(ValueError, match="no single kernel"):
                model.lengthscale_map(xs)
            return
        ls = model.lengthscale_map(xs)
        assert ls.shape == (len(xs),) and torch.isfinite(ls).all() and (ls > 0).all()
        with pytest.raises(ValueError):
            model.lengthscale_map(with_nan(self.batches()[0][0][:5], (2, -1)))

    def test_invalid_input_leaves_the_model_unchanged(self) -> None:
        """Each of [`invalid_inputs`][onlinegp.testing.invalid_inputs], before and after the first batch, is a
        ValueError saying what is wrong, and the model is exactly as it was."""
        stream, xs = self.batches(), self.prediction_inputs()
        for batches in (0, 2):
            model = self.fed(batches)
            untouched, before = copy.deepcopy(model), copy.deepcopy(model.state_dict())
            for x, y, message, bad_x in invalid_inputs(*stream[0]):
                if batches == 0 and message == "columns":  # any width is fine for a first batch
                    continue
                with pytest.raises(ValueError, match=message):
                    model.update(x, y)
                assert state_equal(before, model.state_dict()), message
                if batches and bad_x:
                    with pytest.raises(ValueError):
                        model.predict(x)
            assert model.input_dim == untouched.input_dim and model.num_updates == batches
            assert_same_next_update(model, untouched, stream[2], xs)

    def test_failure_inside_an_update_restores_the_model(self) -> None:
        """``_update`` runs to the end (mutating the model) and then raises: the model must be exactly as before."""
        stream, xs = self.batches(), self.prediction_inputs()
        for batches in (0, 2):
            model = self.fed(batches)
            untouched, before = copy.deepcopy(model), copy.deepcopy(model.state_dict())
            update_failing_after_mutation(model, *stream[2])
            assert model.input_dim == untouched.input_dim and model.num_data == sum(len(x) for x, _ in stream[:batches])
            assert state_equal(before, model.state_dict())
            assert_same_next_update(model, untouched, stream[2], xs)

    def test_checkpoint_round_trip_is_exact(self, tmp_path: Path) -> None:
        """``save`` and ``load`` through a file into a model that has never seen data: the same state, predictions
        and next update; a model of another input width refuses the checkpoint."""
        stream, xs = self.batches(), self.prediction_inputs()
        width = stream[0][0].shape[1]
        model = self.fed(2)
        model.save(tmp_path / "model.pt")
        clone = self.make()  # has never seen data: adopts the width
        assert clone.input_dim is None
        clone.load(tmp_path / "model.pt")
        assert clone.input_dim == width
        assert_same_model(model, clone, xs)
        assert_same_next_update(model, clone, stream[2], xs)
        with pytest.raises(ValueError, match="input_dim"):
            self.make(input_dim=width + 1).load_state_dict(model.state_dict())

    def test_checkpoint_before_the_first_update_is_exact(self) -> None:
        """A checkpoint of a model that has seen no data gives a model that absorbs the same batches identically."""
        stream, xs = self.batches(), self.prediction_inputs()
        model, clone = self.make(), self.make()
        clone.load_state_dict(copy.deepcopy(model.state_dict()))
        assert clone.input_dim is None and state_equal(model.state_dict(), clone.state_dict())
        assert_same_next_update(model, clone, stream[0], xs)
        assert_same_next_update(model, clone, stream[1], xs)

    def test_loaded_model_shares_no_state_with_its_source(self) -> None:
        """A model loaded from a live ``state_dict`` (not a copy) and then updated leaves its source unchanged."""
        model = self.fed(2)
        before = copy.deepcopy(model.state_dict())
        clone = self.make()
        clone.load_state_dict(model.state_dict())  # not a copy: a live state_dict
        clone.update(*self.batches()[2])
        assert state_equal(before, model.state_dict())

    def test_a_failed_load_leaves_the_model_as_it_was(self) -> None:
        """A damaged checkpoint is refused and the model is exactly as it was."""
        model = self.fed(1)
        before = copy.deepcopy(model.state_dict())
        state = self.fed(2).state_dict()
        state["_extra_state"] = {**state["_extra_state"], "num_updates": None, "generator": "damaged"}
        with pytest.raises((TypeError, RuntimeError, ValueError)):
            model.load_state_dict(state)
        assert state_equal(before, model.state_dict())
