import gpytorch
import pytest
import torch

from onlinegp import AttentiveKernel
from onlinegp.kernels import dense, diagonal, lengthscale_map, make_kernel

pytestmark = pytest.mark.usefixtures("ak_backend")


def test_attentive_kernel_psd_symmetric_and_diag():
    torch.manual_seed(0)
    k = gpytorch.kernels.ScaleKernel(AttentiveKernel(2)).double()
    k.outputscale = 2.5
    X = torch.rand(80, 2, dtype=torch.float64) * 2 - 1
    with torch.no_grad():
        K = dense(k, X)
        assert torch.allclose(K, K.T, atol=1e-14)
        assert torch.linalg.eigvalsh(K).min() > -1e-10
        assert torch.allclose(diagonal(k, X), K.diagonal())
        assert torch.allclose(K.diagonal(), torch.full((80,), 2.5, dtype=torch.float64))


def test_attentive_kernel_matches_definition():
    torch.manual_seed(1)
    ak = AttentiveKernel(3, num_lengthscales=4, lengthscale_bounds=(0.1, 0.7)).double()
    X1, X2 = torch.rand(5, 3, dtype=torch.float64), torch.rand(4, 3, dtype=torch.float64)
    with torch.no_grad():
        K = ak(X1, X2).to_dense()
        w1, w2 = ak.weights(X1), ak.weights(X2)
        ref = torch.zeros(5, 4, dtype=torch.float64)
        for i in range(5):
            for j in range(4):
                d2 = ((X1[i] - X2[j]) ** 2).sum()
                mix = sum(w1[i, m] * w2[j, m] * torch.exp(-d2 / (2 * ak.lengthscales[m] ** 2)) for m in range(4))
                ref[i, j] = (w1[i] @ w2[j]) * mix
    assert torch.allclose(K, ref, atol=1e-14)


def test_attentive_kernel_gradients_reach_every_parameter():
    k = make_kernel("ak", 2)
    X = torch.rand(20, 2, dtype=torch.float64)
    dense(k, X, X[:7]).sum().backward()
    for name, p in k.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


def test_lengthscale_map_within_bounds():
    k = make_kernel("ak", 2, lengthscale_bounds=(0.05, 0.5))
    ls = lengthscale_map(k, torch.rand(30, 2, dtype=torch.float64))
    assert ls.shape == (30,) and (ls >= 0.05).all() and (ls <= 0.5).all()
    rbf = make_kernel("rbf", 2, lengthscale=0.3)
    assert torch.allclose(
        lengthscale_map(rbf, torch.zeros(3, 2, dtype=torch.float64)), torch.full((3,), 0.3, dtype=torch.float64)
    )


def test_attentive_kernel_gradients_match_finite_differences():
    """The fused mixture has a hand-written backward: check it against autograd's numerical Jacobian."""
    torch.manual_seed(2)
    ak = AttentiveKernel(2, num_lengthscales=3).double()
    X1 = (torch.rand(6, 2, dtype=torch.float64) * 2 - 1).requires_grad_()
    X2 = (torch.rand(4, 2, dtype=torch.float64) * 2 - 1).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: ak(a, b).to_dense(), (X1, X2))
    assert torch.autograd.gradcheck(lambda a: ak(a, a).to_dense(), (X1,))
    params = list(ak.parameters())
    X = torch.rand(5, 2, dtype=torch.float64)
    weights = torch.arange(25, dtype=torch.float64).reshape(5, 5)

    def loss():
        return (ak(X, X).to_dense() * weights).sum()

    # parameter gradients: the analytic gradient of a scalar loss against central differences
    grads = torch.autograd.grad(loss(), params)
    for p, g in zip(params, grads):
        flat = p.data.view(-1)
        for i in range(0, flat.numel(), max(1, flat.numel() // 4)):
            old = float(flat[i])
            flat[i] = old + 1e-6
            up = float(loss().detach())
            flat[i] = old - 1e-6
            down = float(loss().detach())
            flat[i] = old
            assert abs((up - down) / 2e-6 - float(g.view(-1)[i])) < 1e-5 * max(1.0, abs(float(g.view(-1)[i])))
