"""The conventions a gpytorch or PyTorch user expects of a model and its predictions (issue 36): ``variance``,
``stddev``, ``covariance_matrix`` and unpacking of a Prediction; the input's floating dtype kept; ``model(x)``
predicts; ``load`` on the class; a ``repr`` with method, options, N and M; dtype changes refused clearly."""

import numpy as np
import pytest
import torch

import onlinegp
from onlinegp.testing import toy
from onlinegp.training import Training

X, Y = toy(60, seed=3)
SMALL = {"num_inducing": 12, "training": Training(steps=2)}


@pytest.fixture(scope="module")
def model() -> onlinegp.OnlineGP:
    m = onlinegp.OSGPR(**SMALL)
    m.update(X, Y)
    return m


def test_prediction_names_and_unpacking(model):
    pred = model.predict(X[:7], full_cov=True)
    assert torch.equal(pred.variance, pred.var_y) and torch.allclose(pred.stddev, pred.var_y.sqrt())
    mean, variance = pred
    assert torch.equal(mean, pred.mean) and torch.equal(variance, pred.variance)
    # the covariance of y: the latent covariance plus the noise, so that its diagonal is the variance
    assert torch.allclose(pred.covariance_matrix.diagonal(), pred.variance)
    assert torch.allclose(pred.covariance_matrix - torch.diag(pred.var_y - pred.var_f), pred.cov_f)
    with pytest.raises(ValueError, match="full_cov=True"):
        _ = model.predict(X[:7]).covariance_matrix


@pytest.mark.parametrize(
    "x, dtype",
    [
        (X[:5].float(), torch.float32),
        (X[:5].numpy().astype(np.float32), torch.float32),
        (X[:5].numpy(), torch.float64),
        (X[:5].tolist(), torch.float64),  # not a floating array: the model's dtype
    ],
    ids=["tensor32", "array32", "array64", "list"],
)
def test_predictions_come_back_in_the_input_dtype(model, x, dtype):
    pred = model.predict(x, full_cov=True)
    assert {t.dtype for t in (pred.mean, pred.var_f, pred.var_y, pred.cov_f)} == {dtype}
    assert torch.allclose(pred.mean.double(), model.predict(X[:5]).mean, atol=1e-5)


def test_calling_the_model_gives_the_differentiable_posterior(model):
    x = X[:4].clone().requires_grad_(True)
    pred = model(x)
    assert torch.allclose(pred.mean, model.predict(X[:4]).mean)
    pred.mean.sum().backward()
    assert x.grad is not None and bool(torch.isfinite(x.grad).all())


def test_load_on_the_class_and_on_an_instance(model, tmp_path):
    path = tmp_path / "osgpr.pt"
    model.save(path)
    fresh = onlinegp.OSGPR.load(path, **SMALL)
    assert isinstance(fresh, onlinegp.OSGPR) and fresh.options() == model.options()
    assert torch.equal(fresh.predict(X[:5]).mean, model.predict(X[:5]).mean)
    into = onlinegp.OSGPR(**SMALL)
    assert into.load(path) is into and torch.equal(into.predict(X[:5]).mean, model.predict(X[:5]).mean)
    with pytest.raises(ValueError, match="on the class"):
        into.load(path, num_inducing=5)


def test_repr_shows_method_options_and_sizes(model):
    text = repr(model)
    assert text.startswith("OSGPR(") and "num_inducing=12" in text and "training=Training(steps=2)" in text
    assert "N=60" in text and f"M={model.num_inducing}" in text
    assert "seed=" not in text and "Likelihood" not in text  # defaults and the module tree are left out
    assert repr(onlinegp.make_model("z-rand")) == "POAM(inducing='random') [N=0]"


@pytest.mark.parametrize(
    "convert",
    [
        lambda m: m.to(torch.float32),
        lambda m: m.to("cpu", torch.float16),
        lambda m: m.to(torch.zeros(1, dtype=torch.float32)),
        lambda m: m.float(),
        lambda m: m.half(),
        lambda m: m.bfloat16(),
        lambda m: m.type(torch.float32),
    ],
    ids=["to", "to-device-dtype", "to-tensor", "float", "half", "bfloat16", "type"],
)
def test_dtype_changes_are_refused_and_leave_the_model_working(model, convert):
    before = model.predict(X[:5]).mean
    with pytest.raises(ValueError, match="dtype=torch"):
        convert(model)
    assert torch.equal(model.predict(X[:5]).mean, before)
    assert model.double() is model and model.to(torch.float64) is model and model.to("cpu") is model


def test_a_float32_model_predicts_in_the_input_dtype():
    m = onlinegp.OSGPR(dtype=torch.float32, **SMALL)
    m.update(X.float(), Y.float())
    assert m.predict(X[:3].float()).mean.dtype == torch.float32 and m.predict(X[:3]).mean.dtype == torch.float64
    assert m.float() is m
