"""The Attentive Kernel evaluated by a small C routine compiled at first use (``attentive_mixture.c``).

PyTorch evaluates k = (w1 w2ᵀ) ⊙ Σ_m (w1_m w2_mᵀ) ⊙ exp(c_m D²) as a dozen memory-bound passes over (N, N')
arrays per base kernel; the C routine makes one pass, keeps each row's ten exponentials in cache, vectorises the
exponential, and recomputes it in the backward instead of storing it. It is compiled once per machine with the
system's C compiler (``$CC``, else ``cc``/``gcc``) into ``$ONLINEGP_CACHE`` (default ``~/.cache/onlinegp``) and
loaded with ctypes, which releases the GIL, so rows are split across ``torch.get_num_threads()`` threads.

Without a compiler, or switched off (``onlinegp.settings.native_kernel(False)``, or ``ONLINEGP_NATIVE=0`` in the
environment), :func:`library` returns ``None`` (with one warning if the compiler failed) and the kernel uses its
PyTorch path; both agree to round-off (tests/library/kernels/test_native.py).
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import torch
from torch import Tensor

from .. import portable, settings

SOURCE = Path(__file__).with_name("attentive_mixture.c")
FLAGS = ("-O3", "-fno-math-errno", "-fno-trapping-math", "-shared", "-fPIC")
#: the default builds, tried in order: the machine's vector width matters (AVX-512 doubles the exponential's speed
#: over SSE2), and SIMD reductions may sum in any order
BUILDS = (("-fopenmp-simd", "-march=native"), ("-fopenmp-simd",))
#: the portable mode's build (onlinegp.portable): plain x86-64, no FMA contraction, no SIMD pragmas, so every
#: operation runs in the source's order and any compiler on any CPU of the architecture gives the same bits
PORTABLE_BUILD = (("-march=x86-64", "-mtune=generic") if platform.machine() in ("x86_64", "AMD64") else ()) + (
    "-ffp-contract=off",
)
#: below this many exponentials (n1 · n2 · M) a call runs on one thread (default of settings.native_thread_work)
THREAD_WORK = 1 << 19


def cache_dir() -> Path:
    """Where compiled routines live: ``$ONLINEGP_CACHE``, else ``$XDG_CACHE_HOME/onlinegp`` or ``~/.cache/onlinegp``."""
    if os.environ.get("ONLINEGP_CACHE"):
        return Path(os.environ["ONLINEGP_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "onlinegp"


def _cpu_signature() -> str:
    """The CPU's feature flags (a routine built with -march=native must not run on another CPU kind)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return platform.processor() + platform.machine()


def _compile(compiler: list[str], builds: tuple[tuple[str, ...], ...], target: Path) -> str | None:
    """Compile SOURCE into ``target`` with the first of ``builds`` (extra flags) that compiles (atomically:
    concurrent processes may race); the error text when none does."""
    target.parent.mkdir(parents=True, exist_ok=True)
    errors = []
    for arch in builds:
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
        os.close(fd)
        try:
            run = subprocess.run([*compiler, *FLAGS, *arch, str(SOURCE), "-o", tmp], capture_output=True, text=True)
            if run.returncode == 0:
                os.replace(tmp, target)
                return None
            errors.append(run.stderr.strip())
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return "\n".join(errors)


def _load(target: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(target))
    pointer, size = ctypes.c_void_p, ctypes.c_long
    lib.ak_forward.argtypes = [size, size, size, *[pointer] * 5, size, size, ctypes.c_int]
    lib.ak_backward.argtypes = [size, size, size, *[pointer] * 8, size, size, ctypes.c_int]
    lib.sq_distances.argtypes = [size, size, size, pointer, pointer, pointer, size, size]
    lib.sq_distances.restype = None
    lib.mirror_upper.argtypes = [size, pointer]
    lib.mirror_upper.restype = None
    return lib


def numerics() -> str:
    """The numeric mode that ran, for a run's record: 'portable' (with the Attentive Kernel's path when it is not the
    C routine) or 'default'."""
    if not portable.active():
        return "default"
    return "portable" if library() is not None else "portable (no C compiler: PyTorch Attentive Kernel)"


def library() -> ctypes.CDLL | None:
    """The compiled routine (built on first use: the portable build in the portable mode), or None when switched off
    (settings.native_kernel) or no compiler could build it."""
    return _build(portable.active()) if settings.native_kernel.value() else None


@cache
def _build(portable_build: bool) -> ctypes.CDLL | None:
    compiler = shlex.split(os.environ.get("CC", "")) or [shutil.which("cc") or shutil.which("gcc") or ""]
    if not compiler[0]:
        return None
    builds = (PORTABLE_BUILD,) if portable_build else BUILDS
    # a -march=native build is the CPU's own; the portable one is the same on every CPU
    machine = "portable" if portable_build else _cpu_signature()
    key = hashlib.sha256("\0".join([SOURCE.read_text(), *FLAGS, *map(" ".join, builds), *compiler, machine]).encode())
    target = cache_dir() / f"attentive_mixture-{'portable-' if portable_build else ''}{key.hexdigest()[:16]}.so"
    error = None
    for attempt in range(2):  # a cached library that will not load (damaged) is rebuilt once
        if attempt or not target.exists():
            try:
                error = _compile(compiler, builds, target)
            except OSError as exc:
                error = str(exc)
            if error is not None:
                break
        try:
            return _load(target)
        except (OSError, AttributeError) as exc:
            error = f"{target}: {exc}"
    warnings.warn(
        f"onlinegp could not build or load its native Attentive Kernel ({' '.join(compiler)}: "
        f"{error[:500]}); using the slower PyTorch path. Set ONLINEGP_NATIVE=0 to silence this.",
        stacklevel=3,
    )
    return None


def usable(*tensors: Tensor) -> bool:
    """Whether the native routine can evaluate these (2-D float64 CPU tensors) and is available."""
    return (
        all(t.device.type == "cpu" and t.dtype == torch.float64 and t.dim() == 2 for t in tensors)
        and library() is not None
    )


@cache
def _pool(pid: int, workers: int) -> ThreadPoolExecutor:
    """A thread pool per process (a forked child inherits the parent's pool object but not its threads)."""
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="onlinegp-ak")


def _row_ranges(n1: int, n2: int, M: int, symmetric: bool) -> list[tuple[int, int]]:
    """Row blocks of equal work for the available threads (triangular work when symmetric)."""
    threads = torch.get_num_threads()
    work = n1 * n2 * M // (2 if symmetric else 1)
    parts = max(1, min(threads, n1, work // settings.native_thread_work.value()))
    if symmetric:  # the rows before r hold the fraction 1 - (1 - r/n)^2 of the triangle
        edges = [round(n1 * (1 - math.sqrt(1 - k / parts))) for k in range(parts + 1)]
    else:
        edges = [round(n1 * k / parts) for k in range(parts + 1)]
    return [(lo, hi) for lo, hi in zip(edges, edges[1:]) if hi > lo]


def _run(ranges: list[tuple[int, int]], call) -> None:
    """call(r0, r1, part) for each row block, on threads when there are several; a nonzero return (the C routine's
    allocation failure) raises."""
    if len(ranges) <= 1:
        codes = [call(*block, 0) for block in ranges]
    else:
        codes = list(_pool(os.getpid(), len(ranges)).map(lambda item: call(*item[1], item[0]), enumerate(ranges)))
    if any(codes):
        raise MemoryError("the native Attentive Kernel could not allocate its row buffers")


def _p(t: Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


def _operands(w1: Tensor, w2: Tensor, sq: Tensor, coef: Tensor, *more: Tensor):
    """(n1, n2, M) and the C routine's contiguous operands (w1, w2ᵀ, sq, coef), after checking that the shapes agree
    (the C routine trusts them)."""
    (n1, M), n2 = w1.shape, w2.shape[0]
    if w2.shape[1] != M or coef.shape != (M,) or any(t.shape != (n1, n2) for t in (sq, *more)):
        raise ValueError(
            f"native Attentive Kernel: shapes disagree (w1 {tuple(w1.shape)}, w2 {tuple(w2.shape)}, "
            f"sq {tuple(sq.shape)}, coefficients {tuple(coef.shape)})"
        )
    return (n1, n2, M), (w1.contiguous(), w2.mT.contiguous(), sq.contiguous(), coef.contiguous())


def sq_distances(x1: Tensor, x2: Tensor) -> Tensor:
    """Squared Euclidean distances (n1, n2) from exact differences, one pass (no autograd)."""
    lib, (n1, D), n2 = library(), x1.shape, x2.shape[0]
    if x2.shape[1] != D:
        raise ValueError(f"native squared distances: {tuple(x1.shape)} and {tuple(x2.shape)} differ in dimension")
    a, bT = x1.contiguous(), x2.mT.contiguous()
    out = torch.empty(n1, n2, dtype=torch.float64)
    _run(
        _row_ranges(n1, n2, 10 * D, False),
        lambda r0, r1, _: lib.sq_distances(n1, n2, D, _p(a), _p(bT), _p(out), r0, r1),
    )
    return out


def attentive(w1: Tensor, w2: Tensor, sq: Tensor, coef: Tensor, symmetric: bool) -> Tensor:
    """k = (w1 w2ᵀ) ⊙ Σ_m (w1_m w2_mᵀ) ⊙ exp(c_m sq) (symmetric: w1 is w2 and sq is symmetric)."""
    lib, ((n1, n2, M), (a, bT, sq, coef)) = library(), _operands(w1, w2, sq, coef)
    out = torch.empty(n1, n2, dtype=torch.float64)
    _run(
        _row_ranges(n1, n2, M, symmetric),
        lambda r0, r1, _: lib.ak_forward(n1, n2, M, _p(a), _p(bT), _p(sq), _p(coef), _p(out), r0, r1, symmetric),
    )
    if symmetric:
        lib.mirror_upper(n1, _p(out))
    return out


def attentive_backward(
    w1: Tensor, w2: Tensor, sq: Tensor, coef: Tensor, grad: Tensor, symmetric: bool, need_sq: bool
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """Gradients (w.r.t. w1, w2, sq) of ⟨grad, k⟩. symmetric: w1 is w2 and one gradient w.r.t. w is returned
    (the second is None); the distance gradient is computed only when ``need_sq``."""
    if symmetric and need_sq:
        raise ValueError(
            "native Attentive Kernel: the symmetric form reads one triangle of sq, so it has no sq gradient"
        )
    lib, ((n1, n2, M), (a, bT, sq, coef)) = library(), _operands(w1, w2, sq, coef, grad)
    G = (grad + grad.mT) if symmetric else grad.contiguous()
    ga = torch.empty(n1, M, dtype=torch.float64)
    gsq = torch.empty(n1, n2, dtype=torch.float64) if need_sq else None
    ranges = _row_ranges(n1, n2, M, symmetric)
    gbT = torch.zeros(max(len(ranges), 1), M, n2, dtype=torch.float64)  # one accumulator per thread
    _run(
        ranges,
        lambda r0, r1, part: lib.ak_backward(
            n1, n2, M, _p(a), _p(bT), _p(sq), _p(coef), _p(G), _p(ga), _p(gbT[part]), _p(gsq), r0, r1, symmetric
        ),
    )
    gb = gbT.sum(0).mT
    if symmetric:
        return ga.add_(gb), None, gsq
    return ga, gb, gsq
