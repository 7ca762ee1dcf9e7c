"""onlinegp.sklearn: every registered method as a scikit-learn regressor, checked by scikit-learn's own estimator
checks (for osgpr and poam), in a Pipeline, and with partial_fit, predict(return_std/return_cov) and its params."""

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("sklearn", reason="the sklearn extra is not installed (pip install '.[sklearn]')")

from sklearn.base import clone  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from onlinegp.sklearn import OnlineGPRegressor  # noqa: E402

# small models, with enough steps to pass check_regressors_train (R² > 0.5 on its 10-input data); no check is
# expected to fail. Two are skipped by scikit-learn itself where pandas or SCIPY_ARRAY_API are absent.
CHECKED = [
    OnlineGPRegressor("osgpr", num_inducing=10, num_steps=20),
    OnlineGPRegressor("poam", num_inducing=30, num_steps=50),
]


@parametrize_with_checks(CHECKED)
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


def data(n: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 100, size=(n, 2)) * [1.0, 0.01]  # inputs on very different scales
    return X, np.sin(X[:, 0] / 15) + 20 * X[:, 1] + 0.05 * rng.standard_normal(n)


def test_in_a_pipeline_after_standard_scaler():
    X, y = data()
    pipe = make_pipeline(StandardScaler(), OnlineGPRegressor("osgpr", num_inducing=30, num_steps=30)).fit(X, y)
    assert pipe.score(X, y) > 0.9
    mean, std = pipe.predict(X[:5], return_std=True)
    assert mean.shape == std.shape == (5,) and (std > 0).all()


def test_fit_streams_in_updates_and_partial_fit_updates():
    X, y = data()
    reg = OnlineGPRegressor("osgpr", update_size=40, num_inducing=20, num_steps=5).fit(X, y)
    assert reg.model_.num_updates == 3 and reg.n_features_in_ == 2
    assert reg.fit(X[:50], y[:50]).model_.num_data == 50  # fit starts afresh
    online = OnlineGPRegressor("osgpr", num_inducing=20, num_steps=5)
    for part in np.array_split(np.arange(120), 3):
        online.partial_fit(X[part], y[part])
    assert online.model_.num_updates == 3 and online.model_.num_data == 120
    with pytest.raises(ValueError, match="features"):
        online.partial_fit(X[:5, :1], y[:5])
    with pytest.raises(ValueError, match="update_size"):
        OnlineGPRegressor(update_size=0).fit(X, y)


def test_predict_std_and_cov_are_those_of_the_prediction():
    X, y = data()
    reg = OnlineGPRegressor("poam", num_inducing=20, num_steps=5).fit(X, y)
    pred = reg.model_.predict(X[:6], full_cov=True)
    mean, std = reg.predict(X[:6], return_std=True)
    np.testing.assert_allclose(mean, pred.mean.numpy())
    np.testing.assert_allclose(std, pred.stddev.numpy())
    np.testing.assert_allclose(reg.predict(X[:6], return_cov=True)[1], pred.covariance_matrix.numpy())
    with pytest.raises(ValueError, match="not both"):
        reg.predict(X[:6], return_std=True, return_cov=True)
    assert reg.predict(X[:6].astype(np.float32)).dtype == np.float32


def test_params_include_the_model_options():
    reg = OnlineGPRegressor("poam", num_inducing=20, kernel="rbf")
    assert reg.get_params() == {"method": "poam", "update_size": None, "num_inducing": 20, "kernel": "rbf"}
    reg.set_params(num_inducing=15, num_steps=3, method="osgpr")
    assert clone(reg).get_params() == {"method": "osgpr", "update_size": None, "num_inducing": 15, "kernel": "rbf"} | {
        "num_steps": 3
    }
    X, y = data(40)
    assert reg.fit(X, y).model_.options()["num_inducing"] == 15
    with pytest.raises(TypeError, match="unexpected keyword"):
        OnlineGPRegressor("osgpr", not_an_option=1).fit(X, y)


def test_import_onlinegp_does_not_import_sklearn():
    code = "import sys, onlinegp; print('sklearn' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
