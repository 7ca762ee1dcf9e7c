"""Every registered model on a CUDA device: the CPU's answers, every tensor on the device, checkpoints that cross.

The device tests are skipped without a GPU (CI has none); run them on one with ``python -m pytest
tests/library/test_device.py``. The first test runs everywhere: a move rebuilds the model on the target device and
loads its own state into it, and on the CPU that must change nothing, bit for bit."""

import pytest
import torch

from onlinegp import OnlineGP
from tests.library.models.test_conformance import BATCHES, NAMES, XS, build

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

CUDA = torch.device("cuda", 0)


def tensors(value, path="state"):
    """(path, tensor) for every tensor in a nested state (dicts, lists, tuples, dataclasses)."""
    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from tensors(v, f"{path}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from tensors(v, f"{path}[{i}]")
    elif hasattr(value, "__dataclass_fields__"):
        for k in value.__dataclass_fields__:
            yield from tensors(getattr(value, k), f"{path}.{k}")


def off_device(model: OnlineGP) -> list[str]:
    """What the model holds off the GPU (its random generator's state lives on the CPU by design)."""
    state = model.state_dict()
    return [p for p, t in tensors(state) if t.device.type != "cuda" and not p.endswith(".generator")]


def streamed(model: OnlineGP, device: torch.device) -> OnlineGP:
    for x, y in BATCHES:
        model.update(x.to(device), y.to(device))
    return model


@pytest.fixture(params=NAMES)
def name(request) -> str:
    return request.param


def test_a_move_rebuilds_the_model_exactly(name):
    moved, kept = build(name), build(name)
    for x, y in BATCHES[:2]:
        moved.update(x, y)
        kept.update(x, y)
    moved._rebuild_on(torch.device("cpu"))  # what .to(device) does, here onto the device the model is on
    for x, y in BATCHES[2:]:
        moved.update(x, y)
        kept.update(x, y)
    p, q = moved.predict(XS), kept.predict(XS)
    assert torch.equal(p.mean, q.mean) and torch.equal(p.var_y, q.var_y)
    assert moved.to("cpu") is moved and moved.cpu().device.type == "cpu"


def round_off_sensitivity(name: str) -> float:
    """How far the CPU's final mean moves when each input moves by a random one part in 10¹⁵: Adam's first steps
    are about lr · sign(gradient), so a gradient component near zero turns round-off into a whole step, and k-means
    assignments flip on near ties (POAM, SSGP++ and Z-KMEANS at these few-step settings move by a large fraction of
    the targets' std; the L-BFGS methods by ~1e-15)."""
    a, b = build(name), build(name)
    g = torch.Generator().manual_seed(0)
    for x, y in BATCHES:
        a.update(x, y)
        b.update(x * (1 + 1e-15 * torch.randn(x.shape, generator=g, dtype=x.dtype)), y)
    return float((a.predict(XS).mean - b.predict(XS).mean).abs().max())


@needs_cuda
def test_streams_on_the_device_and_matches_the_cpu(name):
    cpu = streamed(build(name), torch.device("cpu"))
    gpu = streamed(build(name).to(CUDA), CUDA)
    assert gpu.device == CUDA
    assert off_device(gpu) == []
    p, q = cpu.predict(XS), gpu.predict(XS.to(CUDA))
    assert q.mean.device == CUDA and q.var_y.device == CUDA
    # the same draws and the same steps; float64 round-off differs between the devices' kernels and the optimiser
    # carries it on, so the devices may differ by as much as round-off moves the method on one device
    scale = float(BATCHES[0][1].std())
    tolerance = 1e-6 * scale + 3 * round_off_sensitivity(name)
    torch.testing.assert_close(q.mean.cpu(), p.mean, rtol=0, atol=tolerance)


@needs_cuda
def test_a_cpu_state_predicts_the_same_on_the_device(name):
    """Prediction is deterministic linear algebra: at one state the devices agree to float64 round-off."""
    cpu = streamed(build(name), torch.device("cpu"))
    gpu = build(name).to(CUDA)
    gpu.load_state_dict(cpu.state_dict())
    assert off_device(gpu) == []
    p, q = cpu.predict(XS), gpu.predict(XS)  # a CPU tensor in: the prediction comes back on the CPU
    assert q.mean.device.type == "cpu"
    assert gpu.predict(XS.numpy()).mean.device == CUDA  # an array in: on the model's device
    torch.testing.assert_close(q.mean, p.mean, rtol=1e-6, atol=1e-8)
    torch.testing.assert_close(q.var_y, p.var_y, rtol=1e-6, atol=1e-10)


@needs_cuda
def test_moves_between_devices_mid_stream_and_back(name, tmp_path):
    model = build(name)
    model.update(*BATCHES[0])
    before = model.predict(XS)
    model.to(CUDA)
    assert model.device == CUDA and off_device(model) == []
    model.update(*BATCHES[1])  # CPU tensors in: moved to the model's device
    path = tmp_path / "model.pt"
    model.save(str(path))
    back = build(name).load(str(path))  # a checkpoint written on the GPU loads on the CPU
    assert back.device.type == "cpu"
    torch.testing.assert_close(back.predict(XS).mean, model.predict(XS).mean, rtol=1e-6, atol=1e-8)
    model.cpu()
    assert model.device.type == "cpu"
    assert all(t.device.type == "cpu" for _, t in tensors(model.state_dict()))
    assert before.mean.device.type == "cpu"
