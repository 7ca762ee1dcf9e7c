"""The compiled Attentive Kernel (onlinegp.kernels.native) against the PyTorch path and a direct computation."""

import os
import subprocess
import sys

import pytest
import torch

from onlinegp import AttentiveKernel, settings
from onlinegp.kernels import native
from onlinegp.kernels.attentive import _Mixture, _NativeAttentive, sqdist

D = torch.float64
pytestmark = pytest.mark.skipif(native.library() is None, reason="no C compiler: native Attentive Kernel unavailable")


def torch_path(w1, w2, sq, coef):
    return (w1 @ w2.mT) * _Mixture.apply(w1, w2, sq, coef, None)


def inputs(n1, n2, seed=0, scale=1.0):
    torch.manual_seed(seed)
    ak = AttentiveKernel(2).double()
    x1, x2 = (torch.rand(n1, 2, dtype=D) * 2 - 1) * scale, (torch.rand(n2, 2, dtype=D) * 2 - 1) * scale
    with torch.no_grad():
        return ak.weights(x1), ak.weights(x2), x1, x2, ak.coefficients(D)


@pytest.mark.parametrize("n1, n2", [(1, 1), (7, 3), (33, 64), (130, 257)])
def test_native_forward_equals_torch_path(n1, n2):
    w1, w2, x1, x2, coef = inputs(n1, n2, scale=3.0)  # scale 3: exponents down to -7000, underflow included
    assert torch.allclose(
        native.attentive(w1, w2, sqdist(x1, x2), coef, False),
        torch_path(w1, w2, sqdist(x1, x2), coef),
        rtol=1e-14,
        atol=1e-16,
    )
    K = native.attentive(w1, w1, sqdist(x1, x1), coef, True)
    assert torch.equal(K, K.mT)
    assert torch.allclose(K, torch_path(w1, w1, sqdist(x1, x1), coef), rtol=1e-14, atol=1e-16)


def test_native_exponential_is_accurate_to_a_few_ulp_and_underflows_to_zero():
    x = torch.cat([torch.zeros(1, dtype=D), -torch.logspace(-12, 3, 20_001, dtype=D)]).unsqueeze(0)
    ones = torch.ones(x.shape[1], 1, dtype=D)  # one base kernel with unit weights: k = exp(c · sq)
    got = native.attentive(ones[:1], ones, x, torch.ones(1, dtype=D), False)
    want = x.exp()
    normal = want > 2.3e-308
    assert ((got - want).abs() / want)[normal].max() < 3 * torch.finfo(D).eps
    assert torch.all(got[~normal] == 0) and torch.all(got[x < -708] == 0)


def test_native_rejects_mismatched_shapes_instead_of_reading_out_of_bounds():
    w1, w2, x1, x2, coef = inputs(4, 3)
    with pytest.raises(ValueError, match="shapes"):
        native.attentive(w1, w2[:2], sqdist(x1, x2), coef, False)
    with pytest.raises(ValueError, match="shapes"):
        native.attentive_backward(w1, w2, sqdist(x1, x2), coef[:3], torch.ones(4, 3, dtype=D), False, False)


@pytest.mark.parametrize("need_sq", [False, True])
def test_native_gradients_pass_gradcheck(need_sq):
    w1, w2, x1, x2, coef = inputs(6, 5, seed=1)
    w1, w2 = w1.clone().requires_grad_(), w2.clone().requires_grad_()
    torch.autograd.gradcheck(
        lambda a, b, s: _NativeAttentive.apply(a, b, s, coef), (w1, w2, sqdist(x1, x2).requires_grad_(need_sq))
    )
    torch.autograd.gradcheck(lambda a: _NativeAttentive.apply(a, a, sqdist(x1, x1), coef), (w1,))
    torch.autograd.gradcheck(
        lambda a, s: _NativeAttentive.apply(a, a, s, coef), (w1, sqdist(x1, x1).requires_grad_(need_sq))
    )


@pytest.mark.parametrize("symmetric", [False, True])
def test_native_gradients_equal_torch_path_on_threads(symmetric):
    threads = torch.get_num_threads()
    w1, w2, x1, x2, coef = inputs(90, 70, seed=2)
    if symmetric:
        w2, x2 = w1, x1
    sq = sqdist(x1, x2)
    G = torch.randn(90, sq.shape[1], dtype=D)
    grads = []
    with settings.native_thread_work(1):  # split rows even for this small problem
        for fn, workers in (
            (torch_path, 1),
            (lambda *a: _NativeAttentive.apply(*a), 1),
            (lambda *a: _NativeAttentive.apply(*a), 3),
        ):
            torch.set_num_threads(workers)
            try:
                a = w1.clone().requires_grad_()
                b = a if symmetric else w2.clone().requires_grad_()
                s = sq.clone().requires_grad_()
                (fn(a, b, s, coef) * G).sum().backward()
                grads.append((a.grad, b.grad, s.grad))
            finally:
                torch.set_num_threads(threads)
    assert native._row_ranges(90, 70, 10, symmetric)[0] == (0, native._row_ranges(90, 70, 10, symmetric)[0][1])
    for got in grads[1:]:
        for x, y in zip(got, grads[0]):
            assert torch.allclose(x, y, rtol=1e-12, atol=1e-13)


def test_row_ranges_cover_every_row_once_with_balanced_triangles(monkeypatch):
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    for symmetric in (False, True):
        with settings.native_thread_work(1):
            ranges = native._row_ranges(1000, 1000, 10, symmetric)
        assert len(ranges) == 4 and ranges[0][0] == 0 and ranges[-1][1] == 1000
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        work = [sum(1000 - i if symmetric else 1000 for i in range(lo, hi)) for lo, hi in ranges]
        assert max(work) / min(work) < 1.02


def run_python(code, env):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)


def test_without_a_compiler_the_torch_path_is_used_with_one_warning(tmp_path):
    code = (
        "import warnings, torch; warnings.simplefilter('always')\n"
        "from onlinegp.kernels import native, make_kernel, dense\n"
        "x = torch.rand(5, 2, dtype=torch.float64)\n"
        "k = make_kernel('ak', 2)\n"
        "print(native.library() is None, round(float(dense(k, x).trace() / k.outputscale), 12))"
    )
    env = {**os.environ, "ONLINEGP_CACHE": str(tmp_path), "CC": "false"}
    run = run_python(code, env)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "5.0"]
    assert "could not build or load its native Attentive Kernel" in run.stderr
    run = run_python(code, {**env, "ONLINEGP_NATIVE": "0"})
    assert run.stdout.split() == ["True", "5.0"] and "could not build" not in run.stderr
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    run = run_python(code, {**os.environ, "ONLINEGP_CACHE": str(blocker / "cache")})  # cache not creatable
    assert run.stdout.split() == ["True", "5.0"] and "could not build" in run.stderr


def test_the_routine_is_compiled_once_into_the_cache(tmp_path):
    code = "from onlinegp.kernels import native; print(native.library() is not None)"
    env = {**os.environ, "ONLINEGP_CACHE": str(tmp_path)}
    assert run_python(code, env).stdout.strip() == "True"
    built = list(tmp_path.glob("attentive_mixture-*.so"))
    assert len(built) == 1
    stamp = built[0].stat().st_mtime_ns
    assert run_python(code, env).stdout.strip() == "True"
    assert list(tmp_path.iterdir()) == built and built[0].stat().st_mtime_ns == stamp
    built[0].write_bytes(b"not a shared library")  # damaged: rebuilt once, then loaded
    assert run_python(code, env).stdout.strip() == "True"
    assert built[0].stat().st_size > 1000


@pytest.mark.parametrize("dim", [1, 2, 5])
def test_native_squared_distances_equal_differences(dim):
    torch.manual_seed(dim)
    x1, x2 = torch.randn(37, dim, dtype=D), torch.randn(300, dim, dtype=D)
    want = (x1[:, None, :] - x2[None, :, :]).pow(2).sum(-1)
    assert torch.allclose(native.sq_distances(x1, x2), want, rtol=1e-15, atol=0)
    assert torch.allclose(sqdist(x1, x2), want, rtol=1e-15, atol=0)
    with pytest.raises(ValueError, match="dimension"):
        native.sq_distances(x1, x2[:, :0])


def _kernel_sum(queue, args):
    queue.put(float(native.attentive(*args, False).sum()))


def test_a_forked_child_gets_its_own_thread_pool():
    """A forked child inherits the parent's pool object but not its threads: reusing it would hang forever.
    (Only the native call runs in the child: torch's own OpenMP pool is not fork-safe either.)"""
    import multiprocessing

    w1, w2, x1, x2, coef = inputs(64, 48)
    args = (w1, w2, sqdist(x1, x2), coef)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with settings.native_thread_work(1):  # the forked child inherits the setting
            want = float(native.attentive(*args, False).sum())  # the parent's two-thread pool now exists
            ctx = multiprocessing.get_context("fork")
            queue = ctx.Queue()
            child = ctx.Process(target=_kernel_sum, args=(queue, args))
            child.start()
            child.join(timeout=60)
    finally:
        torch.set_num_threads(threads)
    alive = child.is_alive()
    if alive:
        child.kill()
    assert not alive, "the forked child hung on the parent's thread pool"
    assert queue.get(timeout=5) == pytest.approx(want, rel=1e-12)
