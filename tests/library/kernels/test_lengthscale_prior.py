"""The default length-scale prior of the stationary kernels above a few inputs, and ``objectives.log_prior``."""

import math

import gpytorch
import pytest
import torch

from onlinegp.kernels import MAX_AK_INPUTS, default_lengthscale, default_lengthscale_prior, make_kernel
from onlinegp.objectives import log_prior


@pytest.mark.parametrize("kernel", ["rbf", "matern52", "auto"])
def test_log_prior_is_the_log_normal_density_of_the_length_scales(kernel):
    k = make_kernel(kernel, 8)
    with torch.no_grad():
        k.base_kernel.lengthscale = torch.linspace(0.1, 5.0, 8)
    width = math.sqrt(3.0)
    direct = torch.distributions.LogNormal(math.log(default_lengthscale(8)) + width**2, width)
    expected = direct.log_prob(k.base_kernel.lengthscale.detach()).sum()
    torch.testing.assert_close(log_prior(k), expected.to(torch.float64))


def test_the_prior_mode_is_the_default_start():
    for d in (4, 8, 32):
        prior = default_lengthscale_prior(d)
        grid = torch.exp(torch.linspace(-3, 3, 20001, dtype=torch.float64))
        mode = grid[prior.log_prob(grid).argmax()]
        assert float(mode) == pytest.approx(default_lengthscale(d), rel=1e-3)


def test_no_prior_up_to_the_mapping_width_or_when_switched_off():
    assert default_lengthscale_prior(MAX_AK_INPUTS) is None
    for kernel in (make_kernel("rbf", 2), make_kernel("ak", 2), make_kernel("rbf", 8, lengthscale_prior=None)):
        assert log_prior(kernel) == 0.0


def test_a_given_prior_is_used():
    prior = gpytorch.priors.GammaPrior(2.0, 1.0)
    k = make_kernel("rbf", 5, lengthscale_prior=prior)
    expected = prior.log_prob(k.base_kernel.lengthscale.detach()).sum()
    torch.testing.assert_close(log_prior(k), expected)


def test_the_prior_gradient_pulls_a_runaway_length_scale_back():
    k = make_kernel("rbf", 8)
    with torch.no_grad():
        k.base_kernel.lengthscale = torch.full((8,), 1e5)
    log_prior(k).backward()
    # the raw parameter is softplus⁻¹(ℓ) ≈ ℓ here: d log p / dℓ = −(1 + (log ℓ − μ)/σ²)/ℓ < 0 pulls ℓ down
    assert bool((k.base_kernel.raw_lengthscale.grad < 0).all())
