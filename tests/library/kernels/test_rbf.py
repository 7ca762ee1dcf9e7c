"""The fused scaled RBF kernel (onlinegp.kernels.rbf) against gpytorch's ScaleKernel(RBFKernel), its oracle."""

import gpytorch
import pytest
import torch

from onlinegp.kernels import dense, make_kernel
from onlinegp.kernels.rbf import rbf_parameters, scaled_rbf

D = torch.float64


def _kernel(ard: bool) -> gpytorch.kernels.ScaleKernel:
    torch.manual_seed(0)
    k = make_kernel("rbf", 4, ard=ard)
    with torch.no_grad():
        k.base_kernel.lengthscale = 0.3 + torch.rand(4 if ard else 1, dtype=D)
        k.outputscale = torch.tensor(1.7, dtype=D)
    return k


@pytest.mark.parametrize("ard", [True, False])
@pytest.mark.parametrize("shared", [False, True])
def test_scaled_rbf_equals_gpytorch_in_value_and_every_gradient(ard, shared):
    """Values to round-off; gradients in both inputs (rows shared between them, as [Z; Z_old] and [Z; X; Z_old] share
    Z), the length-scales and the output scale against autograd through gpytorch."""
    k = _kernel(ard)
    x1 = (torch.rand(30, 4, dtype=D) * 4 - 2).requires_grad_()
    x2 = torch.cat([x1[:10], torch.rand(25, 4, dtype=D) * 4 - 2]) if shared else torch.rand(25, 4, dtype=D) * 4 - 2
    x2 = x2 if shared else x2.requires_grad_()
    weights = torch.randn(30, x2.shape[0], dtype=D)
    out = []
    for fused in (False, True):
        k.zero_grad()
        x1.grad = None
        if not shared:
            x2.grad = None
        K = scaled_rbf(x1, x2, *rbf_parameters(k)) if fused else dense(k, x1, x2)
        (K * weights).sum().backward()
        grads = [x1.grad.clone()] + ([] if shared else [x2.grad.clone()])
        out.append((K.detach(), grads + [p.grad.clone() for p in k.parameters()]))
    assert torch.allclose(out[0][0], out[1][0], rtol=1e-13, atol=1e-15)
    for a, b in zip(out[0][1], out[1][1]):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12)


def test_scaled_rbf_passes_gradcheck():
    x1 = torch.rand(5, 3, dtype=D, requires_grad=True)
    x2 = torch.rand(4, 3, dtype=D, requires_grad=True)
    lengthscale = (0.5 + torch.rand(1, 3, dtype=D)).requires_grad_()
    outputscale = torch.tensor(1.3, dtype=D, requires_grad=True)
    assert torch.autograd.gradcheck(scaled_rbf, (x1, x2, lengthscale, outputscale))


@pytest.mark.parametrize(
    "kernel",
    [
        lambda: make_kernel("matern52", 4),
        lambda: make_kernel("ak", 2),
        lambda: gpytorch.kernels.RBFKernel(ard_num_dims=4),
        lambda: gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(active_dims=[0, 1])),
        lambda: gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(batch_shape=torch.Size([2])), batch_shape=[2]),
    ],
    ids=["matern", "attentive", "unscaled", "active-dims", "batched"],
)
def test_only_a_plain_scaled_rbf_is_fused(kernel):
    assert rbf_parameters(kernel()) is None
    assert rbf_parameters(make_kernel("rbf", 4)) is not None
