"""POAM's M-step kernel evaluation (issue 17): the output scale and the jitter fused into the compiled Attentive
Kernel, CrossCovariance's jittered K_uu, and the half-product in the fixed-q ELBO's backward, each against the
obvious unfused computation."""

import pytest
import torch

from onlinegp.kernels import CrossCovariance, dense, make_kernel, native
from onlinegp.kernels.attentive import AttentiveKernel, _Mixture, _NativeAttentive, sqdist
from onlinegp.objectives import _add_symmetric_product
from onlinegp.posterior import KUU_JITTER, with_jitter

D = torch.float64
needs_native = pytest.mark.skipif(native.library() is None, reason="no C compiler: native Attentive Kernel unavailable")


def weights_and_distances(n1, n2, seed=0):
    torch.manual_seed(seed)
    ak = AttentiveKernel(2).double()
    x1, x2 = torch.rand(n1, 2, dtype=D) * 2 - 1, torch.rand(n2, 2, dtype=D) * 2 - 1
    with torch.no_grad():
        return ak.weights(x1), ak.weights(x2), x1, x2, ak.coefficients(D)


def unfused(w1, w2, sq, coef, scale, jitter):
    """s · k + εI written out: the PyTorch path times s, plus ε = jitter · mean diag (not differentiated)."""
    K = (w1 @ w2.mT) * _Mixture.apply(w1, w2, sq, coef, None) * scale
    if jitter:
        K = K + jitter * K.diagonal().mean().detach() * torch.eye(K.shape[0], dtype=D)
    return K


@needs_native
@pytest.mark.parametrize("symmetric", [False, True])
def test_native_scale_and_jitter_equal_the_unfused_products(symmetric):
    w1, w2, x1, x2, coef = weights_and_distances(37, 23, seed=1)
    if symmetric:
        w2, x2 = w1, x1
    sq = sqdist(x1, x2)
    jitter = 1e-3 if symmetric else 0.0  # large enough that a wrong ε or ε-gradient shows
    G = torch.randn(sq.shape, dtype=D)  # not symmetric: only its symmetric part may matter for k(x, x)
    results = []
    for fn in (unfused, _NativeAttentive.apply):
        a = w1.clone().requires_grad_()
        b = a if symmetric else w2.clone().requires_grad_()
        s = torch.tensor(1.7, dtype=D, requires_grad=True)
        K = fn(a, b, sq, coef, s, jitter)
        (K * G).sum().backward()
        results.append((K.detach(), a.grad, None if symmetric else b.grad, s.grad))
    (K0, *g0), (K1, *g1) = results
    assert torch.allclose(K1, K0, rtol=1e-13, atol=1e-15)
    for x, y in zip(g1, g0):
        if x is not None:
            assert torch.allclose(x, y, rtol=1e-10, atol=1e-13)


@needs_native
def test_native_scaled_kernel_passes_gradcheck():
    w1, w2, x1, x2, coef = weights_and_distances(6, 5, seed=2)
    a, b = w1.clone().requires_grad_(), w2.clone().requires_grad_()
    s = torch.tensor(0.8, dtype=D, requires_grad=True)
    torch.autograd.gradcheck(lambda a, b, s: _NativeAttentive.apply(a, b, sqdist(x1, x2), coef, s), (a, b, s))
    torch.autograd.gradcheck(lambda a, s: _NativeAttentive.apply(a, a, sqdist(x1, x1), coef, s), (a, s))
    moving = sqdist(x1, x1).requires_grad_()
    torch.autograd.gradcheck(lambda a, q, s: _NativeAttentive.apply(a, a, q, coef, s), (a, moving, s))


@pytest.mark.parametrize("name", ["ak", "rbf"])
def test_jittered_cross_covariance_equals_with_jitter_of_dense_calls(name, ak_backend):
    torch.manual_seed(3)
    k = make_kernel(name, 2)
    k.outputscale = 1.3
    Z, X = torch.rand(30, 2, dtype=D) * 2 - 1, torch.rand(12, 2, dtype=D) * 2 - 1
    cross = CrossCovariance(k, Z, jitter=KUU_JITTER[D])
    Gzz, Gzx = torch.randn(30, 30, dtype=D), torch.randn(30, 12, dtype=D)
    results = []
    for pair in (lambda: (with_jitter(dense(k, Z)), dense(k, Z, X)), lambda: cross(X)):
        k.zero_grad()
        Kzz, Kzx = pair()
        ((Kzz * Gzz).sum() + (Kzx * Gzx).sum()).backward()
        results.append((Kzz.detach(), Kzx.detach(), [p.grad.clone() for p in k.parameters()]))
    (Kzz0, Kzx0, g0), (Kzz1, Kzx1, g1) = results
    assert torch.allclose(Kzz1, Kzz0, rtol=1e-13, atol=1e-15) and torch.allclose(Kzx1, Kzx0, rtol=1e-13, atol=1e-15)
    assert not torch.equal(Kzz1, dense(k, Z).detach())  # the ε is there
    for x, y in zip(g1, g0):
        assert torch.allclose(x, y, rtol=1e-10, atol=1e-13)


def test_jitter_is_refused_off_the_diagonal():
    w1, w2, x1, x2, coef = weights_and_distances(4, 3)
    with pytest.raises(ValueError, match="jitter"):
        AttentiveKernel(2).double().combine(w1, w2, sqdist(x1, x2), jitter=1e-8)


@pytest.mark.parametrize("M", [1, 7, 8])
def test_half_symmetric_product_has_the_full_products_symmetric_part(M):
    torch.manual_seed(M)
    W, h = torch.randn(M, 5, dtype=D), -torch.rand(5, dtype=D)
    G0 = torch.randn(M, M, dtype=D)
    added = _add_symmetric_product(G0.clone(), W * h, W) - G0
    assert torch.allclose(0.5 * (added + added.mT), (W * h) @ W.mT, rtol=1e-13, atol=1e-14)
