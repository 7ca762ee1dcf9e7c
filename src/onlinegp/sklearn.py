"""scikit-learn's regressor interface over every registered method (needs the ``sklearn`` extra:
``pip install ".[sklearn]"``).

``OnlineGPRegressor("poam", num_inducing=100)`` is :func:`~onlinegp.make_model` behind ``fit``/``partial_fit``/
``predict``, so a model goes into pipelines, cross-validation and grid searches (Pedregosa et al. 2011; the
estimator conventions of Buitinck et al. 2013). ``import onlinegp`` does not import scikit-learn; this module does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .models import make_model


class OnlineGPRegressor(RegressorMixin, BaseEstimator):
    """A scikit-learn regressor over the online GP registered as ``method``.

    ``fit`` builds a fresh model and streams X through it, ``partial_fit`` updates the current one (the first call
    builds it), as ``SGDRegressor`` does. ``predict(X, return_std=True)`` gives the predictive standard deviation
    of a new observation (noise included, :attr:`~onlinegp.base.Prediction.stddev`), ``return_cov`` its covariance.
    The model is ``model_``; ``get_params``/``set_params`` list the method, ``update_size`` and every option given.

    Args:
        method: a registered name (``onlinegp.MODELS``), e.g. ``"osgpr"`` or ``"poam"``.
        update_size: rows per ``update`` in ``fit``; None (default) absorbs all of X in one update. (Not named
            ``batch_size``: that is a field of a model's training spec, POAM's M-step's mini-batch.)
        **options: keyword options of the method's class (``num_inducing``, ``training``, ``seed``, ...).
    """

    def __init__(self, method: str = "osgpr", *, update_size: int | None = None, **options: Any):
        self.method = method
        self.update_size = update_size
        self._options = options  # private: scikit-learn allows only the signature's names as public attributes

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The method, ``update_size`` and the model options, as keyword arguments of the constructor."""
        return {"method": self.method, "update_size": self.update_size, **self._options}

    def set_params(self, **params: Any) -> OnlineGPRegressor:
        """Set the method, ``update_size`` or model options (a new name is a new option); takes effect at the next
        ``fit`` (or the first ``partial_fit``)."""
        for key, value in params.items():
            if key in ("method", "update_size"):
                setattr(self, key, value)
            else:
                self._options[key] = value
        return self

    def fit(self, X: Any, y: Any) -> OnlineGPRegressor:
        """Build a fresh model and absorb ``X``, ``y`` in updates of ``update_size`` rows (all at once by default)."""
        X, y = validate_data(self, X, y, dtype=(np.float64, np.float32), y_numeric=True)
        size = X.shape[0] if self.update_size is None else self.update_size
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise ValueError(f"update_size must be a positive integer or None (one update), got {size!r}")
        model = make_model(self.method, X.shape[1], **self._options)
        for start in range(0, X.shape[0], size):
            model.update(X[start : start + size], y[start : start + size])
        self.model_ = model
        return self

    def partial_fit(self, X: Any, y: Any) -> OnlineGPRegressor:
        """Absorb ``X``, ``y`` in one update of the current model (the first call builds it)."""
        first = not hasattr(self, "model_")
        X, y = validate_data(self, X, y, dtype=(np.float64, np.float32), y_numeric=True, reset=first)
        model = make_model(self.method, X.shape[1], **self._options) if first else self.model_
        model.update(X, y)
        self.model_ = model
        return self

    def predict(self, X: Any, return_std: bool = False, return_cov: bool = False) -> Any:
        """Predictive mean at ``X``; with ``return_std`` also the standard deviation, with ``return_cov`` the
        covariance (of a new observation: noise included), as ``(mean, std)`` or ``(mean, cov)`` arrays."""
        if return_std and return_cov:
            raise ValueError("ask for return_std or return_cov, not both (the std is the root of the cov's diagonal)")
        check_is_fitted(self)
        X = validate_data(self, X, dtype=(np.float64, np.float32), reset=False)
        pred = self.model_.predict(X, full_cov=return_cov)
        if return_cov:
            return pred.mean.numpy(), pred.covariance_matrix.numpy()
        if return_std:
            return pred.mean.numpy(), pred.stddev.numpy()
        return pred.mean.numpy()
