"""Checks every ``update`` runs so that a model going wrong says so (``UpdateReport.warnings`` and a logged warning).

Three symptoms, each cheap next to the update itself:

* **a degenerate scaling**: the first batch (with no ``x_bounds`` or ``y_stats``) had a column, or targets, with a
  single value (a first batch of one point has only such columns): the scaler gave it a unit half-range or std in
  user units and froze it, whatever the stream's real scale (a first point on a 0.01-wide domain left
  the exact GP at RMSE 0.94 of the target's std instead of 0.024). It cannot be refitted later: every model's stored
  terms (inducing inputs, hyper-parameters, posterior summaries) are in the scaled units from the first update on.
* **inputs outside a frozen range**: explicit ``x_bounds`` (or ``'first-batch'``) are frozen, so a stream whose
  inputs reach far beyond them is modelled in a space the defaults were not set for. Reported when a batch has a
  scaled input beyond ``±INPUT_RANGE`` (the frozen range is ±1). With ``x_bounds`` None the range fitted on the
  first batch widens when the bulk of a batch lies beyond ``WIDEN_AT`` half-ranges (:func:`beyond`), in models that
  can follow it; the others refuse a batch whose bulk lies beyond ``INPUT_RANGE`` (:func:`beyond_range`).
* **overconfident predictions**: before absorbing a batch, the model's predictive distribution at the batch's
  inputs is a held-out test. Its mean squared standardised residual ``mean((y − μ)² / σ²_y)`` is about 1 for a
  calibrated model (less once the model has seen nearby data); above ``MAX_Z2`` the predictive variance has
  collapsed relative to the errors (the NLPD is then dominated by ``z²/2``). Checked on batches of at least
  ``MIN_BATCH`` points (one point says little, and single-point streams keep their lazy prediction caches).
* **diverging fit**: the model's mean squared error on the batch, relative to the constant predictor at the scaled
  target mean (``mean(y²)`` in scaled units, floored at ``FIT_FLOOR``): before absorbing, a ratio above
  ``MAX_ERROR_BEFORE`` (a GP far from its data reverts to that constant, so a held-out batch predicted orders of
  magnitude worse means its mean has run away); after absorbing, above ``MAX_ERROR_AFTER`` (the model does not fit
  the very batch it was just fitted to). Both are reported at the update where they happen, on batches of at least
  ``MIN_BATCH`` points as the calibration check.
* **an absurd objective**: the update's objective (a bound or log likelihood in scaled units) beyond
  ``±MAX_OBJECTIVE`` nats per point of the batch, or not finite. With unit target variance and the noise floor a
  model that fits its data is within a few nats per point; values of 1e6 per point and beyond are the optimiser
  running away (O-SVGP's objective reached -3e8 on a batch of 100 before its predictions went wrong).
* **ill-conditioned matrices**: a Cholesky of the update needed more than ``linalg.WARN_JITTER`` relative jitter
  (the model's matrices are near-singular: inducing inputs closer together than the length-scales resolve, a
  collapsing noise or output scale). The update went through, but repeated, this precedes a failed one.
* **a model that stops being sparse**: one whose size adapts to its data with no cap (VIPS, OIPS and the Conditional
  Variance by default) and keeps taking most of each batch as inducing inputs (:func:`size`) costs more with every
  update.
* **hyper-parameters running away**: after the update, in scaled units (unit target variance, inputs in
  [-1, 1]), an output scale above ``MAX_OUTPUTSCALE``, a length-scale below ``LENGTHSCALE_RANGE[0]`` (the kernel
  interpolates the noise) or every length-scale above ``LENGTHSCALE_RANGE[1]`` (the model is a constant; one long
  ARD length-scale alone is an input switched off, which is fine).
"""

from __future__ import annotations

import logging

import torch
from torch import Tensor

from .linalg import WARN_JITTER, JitterLog

log = logging.getLogger("onlinegp")

INPUT_RANGE = 10.0
#: a batch most of whose rows lie beyond this many half-ranges of a scaling fitted on the first batch widens it
WIDEN_AT = 1.2
MAX_Z2 = 100.0
MIN_BATCH = 10
MAX_ERROR_BEFORE = 100.0
MAX_ERROR_AFTER = 10.0
FIT_FLOOR = 1e-2
MAX_OBJECTIVE = 1e4
MAX_OUTPUTSCALE = 1e4
#: (shortest, longest) sane length-scale in scaled units: past 100 input half-ranges the kernel is flat over the
#: domain (correlation above 0.9998 end to end), e.g. 1e5 m on a 60 m survey (3300 half-ranges)
LENGTHSCALE_RANGE = (1e-4, 1e2)
#: below this length-scale (scaled units) a kernel is not evaluated: the squared distances of inputs in [-1, 1]
#: divided by it carry a rounding error of about eps·D·(2/ℓ)², 3e-4 at ℓ = 1e-5 with 32 inputs, 1 at ℓ ≈ 1e-8
MIN_USABLE_LENGTHSCALE = 1e-5
#: a model that has seen at least ``DENSE_AFTER`` points, holds more inducing inputs than ``DENSE_FRACTION`` of them
#: and took more than that fraction of the latest batch as new ones is no longer sparse
DENSE_AFTER = 500
DENSE_FRACTION = 0.5


def scaling(degenerate: list[str], num_points: int) -> list[str]:
    """Warn when the scaling was fitted on a batch that cannot define it (:meth:`~onlinegp.scaling.Scaler.fit`)."""
    if not degenerate:
        return []
    return [
        f"scaling fitted on a batch that cannot define it: {', '.join(degenerate)} took a single value in this first "
        f"batch of {num_points} point(s), so got a unit scale in user units, frozen from now on (stored terms depend "
        "on it); unless that is the stream's real scale, build the model again with x_bounds (the corners of the "
        "input domain) and y_stats (the targets' mean and std), or start it with a batch that spans them"
    ]


def input_range(xs: Tensor) -> tuple[list[str], dict[str, float]]:
    """Warn when scaled inputs leave ``±INPUT_RANGE``; reports the largest |scaled input| and its column."""
    extent = xs.detach().abs().amax(0)
    worst = int(extent.argmax())
    value = float(extent[worst])
    warnings = []
    if value > INPUT_RANGE:
        warnings.append(
            f"inputs outside the frozen range: column {worst} reaches {value:.3g} times the half-range of the scaling "
            "(x_bounds, or the first batch's range with x_bounds='first-batch'); pass x_bounds covering the whole "
            "stream's range, or x_bounds=None to widen it with the data"
        )
    return warnings, {"max_scaled_input": value}


def beyond(xs: Tensor, limit: float) -> bool:
    """Whether the bulk of a batch (more than half its rows) has a scaled input beyond ``±limit``: a vehicle that
    left the range so far, not a table's outliers (a shuffled stream's heavy-tailed columns reach far beyond a first
    batch's range in a few rows only)."""
    return bool((xs.abs().amax(1) > limit).double().mean() > 0.5)


def beyond_range(model: str, column: int, reach: float) -> str:
    """Why a model that cannot widen its scaling refuses a batch far beyond the first batch's range, and what to do."""
    return (
        f"{model} refuses this batch: input column {column} reaches {reach:.3g} times the half-range of the scaling "
        "fitted on the first batch, and this model's stored terms are tied to those units. Build it with x_bounds, "
        "the corners of the whole survey area (x_bounds=[lower corner, upper corner]), or use a model whose scaling "
        "follows the data (POAM and its variants, OVC, the exact GP, with a stationary or Attentive kernel)"
    )


def calibration(mean: Tensor, var_y: Tensor, ys: Tensor) -> tuple[list[str], dict[str, float]]:
    """Warn when the prediction of a batch before it was absorbed is overconfident (see the module docstring)."""
    z2 = float(((ys - mean).pow(2) / var_y.clamp_min(torch.finfo(var_y.dtype).tiny)).mean())
    warnings = []
    if z2 > MAX_Z2:
        rmse = float((ys - mean).pow(2).mean().sqrt())
        warnings.append(
            f"overconfident predictions: before this batch was absorbed its mean squared standardised residual was "
            f"{z2:.3g} (about 1 when calibrated; RMSE {rmse:.3g}, mean predictive std {float(var_y.sqrt().mean()):.3g}"
            " in scaled units): the predictive variance has collapsed"
        )
    return warnings, {"batch_z2": z2}


def fit(mean: Tensor, ys: Tensor, absorbed: bool) -> tuple[list[str], dict[str, float]]:
    """Warn when the batch's mean squared error, over that of the constant predictor, shows the fit diverging (see the
    module docstring); ``absorbed`` tells whether ``mean`` is the prediction after the batch was absorbed."""
    ratio = float((ys - mean).pow(2).mean()) / max(float(ys.pow(2).mean()), FIT_FLOOR)
    key, limit = ("batch_error_after", MAX_ERROR_AFTER) if absorbed else ("batch_error_before", MAX_ERROR_BEFORE)
    warnings = []
    if not ratio <= limit:  # NaN too
        when = "after absorbing this batch" if absorbed else "before this batch was absorbed"
        warnings.append(
            f"diverging fit: {when} its mean squared error was {ratio:.3g} times that of a constant predictor (at most "
            f"{limit:g} expected): the model's mean has run away; this model's answers are wrong from here on. Roll "
            "back to a checkpoint and use smaller steps (lr, num_steps), fewer inducing inputs or another model"
        )
    return warnings, {key: ratio}


def flagged(checks: dict[str, float]) -> bool:
    """Whether an update's checks (its report's ``extra``) found the model overconfident or diverging on its batch."""
    limits = {"batch_z2": MAX_Z2, "batch_error_before": MAX_ERROR_BEFORE, "batch_error_after": MAX_ERROR_AFTER}
    return any(not checks[k] <= limit for k, limit in limits.items() if k in checks)  # NaN too


def objective(value: float | None, num_points: int) -> list[str]:
    """Warn when the update's objective is not finite or beyond ``±MAX_OBJECTIVE`` nats per point of the batch."""
    if value is None or abs(value) <= MAX_OBJECTIVE * num_points:
        return []
    return [
        f"absurd objective: {value:.3g} on a batch of {num_points} (a fit in scaled units is within a few nats per "
        "point): the optimisation has run away and this model's answers are wrong from here on. Roll back to a "
        "checkpoint and use smaller steps (lr, num_steps), fewer inducing inputs or another model"
    ]


def size(before: tuple[int | None, int], after: tuple[int | None, int], bound: int | None = None) -> list[str]:
    """Warn when a model whose size adapts to its data (``(num_inducing, num_data)`` before and after an update)
    grows with it: each update then costs more than the last (O(M³)), and the stream slows down without end. A model
    with a ``bound`` on its size (a fixed M, or a cap) stops growing there and is not reported, and neither is a
    first update (no size before it): its size follows the initial hyper-parameters, and one size shows no growth."""
    (m0, n0), (m1, n1) = before, after
    if (
        m0 is None
        or m1 is None
        or bound is not None
        or n1 < DENSE_AFTER
        or m1 <= DENSE_FRACTION * n1
        or (m1 - m0) <= DENSE_FRACTION * (n1 - n0)
    ):
        return []
    return [
        f"the model is no longer sparse: {m1} inducing inputs for the {n1} points seen, {m1 - m0} of them "
        f"new in this batch of {n1 - n0}, so each update costs more than the last; a collapsed noise variance or "
        "short length-scales (every point looks new) is the usual cause: check report.extra's noise, or bound the size"
    ]


def conditioning(jitter: JitterLog) -> list[str]:
    """Warn when a Cholesky of the update needed more than ``WARN_JITTER`` relative jitter."""
    if jitter.max_relative <= WARN_JITTER:
        return []
    return [
        f"ill-conditioned matrices: {jitter.count} Cholesky factorisation(s) needed jitter, up to {jitter.max_relative:.1e}"
        f" of the matrix's mean diagonal ({jitter.max_jitter:.3g} absolute): its inducing inputs are closer than the "
        "length-scales resolve or its hyper-parameters are collapsing (fewer inducing points, a length-scale or noise "
        "floor, or settings.max_jitter to fail early)"
    ]


def lengthscales_usable(kernel: object) -> bool:
    """False when a length-scale (scaled units) is below ``MIN_USABLE_LENGTHSCALE``: there the kernel's squared
    distances, formed from inputs divided by the length-scale, lose their precision (at 1e-16 k(x, x) evaluated to
    0), so a bound computed there is numerically meaningless. L-BFGS fits treat such a trial point as infeasible."""
    lengthscale = getattr(getattr(kernel, "base_kernel", kernel), "lengthscale", None)
    if not isinstance(lengthscale, Tensor) or not lengthscale.numel():
        return True
    return float(lengthscale.detach().min()) >= MIN_USABLE_LENGTHSCALE


def runaway(kernel: object) -> list[str]:
    """Warn on a kernel's output scale or length-scales (scaled units) outside their sane ranges."""
    warnings = []
    outputscale = getattr(kernel, "outputscale", None)
    if isinstance(outputscale, Tensor) and float(outputscale.detach().max()) > MAX_OUTPUTSCALE:
        value = float(outputscale.detach().max())
        warnings.append(f"output scale ran away: {value:.3g} times the first batch's target variance")
    lengthscale = getattr(getattr(kernel, "base_kernel", kernel), "lengthscale", None)
    if isinstance(lengthscale, Tensor) and lengthscale.numel():
        low, high = float(lengthscale.detach().min()), float(lengthscale.detach().max())
        if low < LENGTHSCALE_RANGE[0] or low > LENGTHSCALE_RANGE[1]:
            warnings.append(
                f"length-scales ran away: range [{low:.3g}, {high:.3g}] in units of the fitted input half-range "
                f"(the shortest should lie within [{LENGTHSCALE_RANGE[0]:g}, {LENGTHSCALE_RANGE[1]:g}])"
            )
    return warnings
