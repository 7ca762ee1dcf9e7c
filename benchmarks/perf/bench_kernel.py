"""The Attentive Kernel alone: the compiled routine against onlinegp's PyTorch path and the paper's formulation.

Times k(Z, Z) (M = 500, symmetric), k(Z, X_b) (batch 256) and k(X_*, Z) (2500 prediction points), each as a
forward without gradients and as forward + backward to the attention network's parameters (the M-step's use), for
three implementations of the same kernel with the same parameters: ``native`` (kernels/attentive_mixture.c, the
default where a C compiler exists), ``torch`` (onlinegp's fused PyTorch path, the fallback) and ``paper`` (a loop over
the base length-scales with one autograd term each, as the POAM paper's code). Values and gradients are checked to
agree. Median of ``--repeats`` calls, wall clock.

    python benchmarks/perf/bench_kernel.py [--repeats 30] [--threads 1]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median, timed, write  # noqa: E402
from stock_gpytorch_poam import PaperAttentiveKernel  # noqa: E402

from onlinegp.kernels import AttentiveKernel, native  # noqa: E402

CASES = {"K_uu (500 x 500)": (500, None), "K_ub (500 x 256)": (500, 256), "K_*u (2500 x 500)": (2500, 500)}


def median_time(fn, repeats: int) -> float:
    """Median wall time of ``repeats`` calls after one warm-up call."""
    fn()
    return median([timed(fn)[0] for _ in range(repeats)])


def evaluate(kernel: AttentiveKernel, implementation: str, x1, x2, grad_out=None):
    """k(x1, x2) (x2 None: k(x1, x1)) by one implementation; with ``grad_out`` also the parameters' gradient."""
    forward = PaperAttentiveKernel.forward if implementation == "paper" else AttentiveKernel.forward
    saved = native.usable
    if implementation == "torch":
        native.usable = lambda *tensors: False
    try:
        kernel.zero_grad(set_to_none=True)
        with torch.set_grad_enabled(grad_out is not None):
            K = forward(kernel, x1, x1 if x2 is None else x2)
            if grad_out is None:
                return K, None
            (K * grad_out).sum().backward()
        return K.detach(), torch.cat([p.grad.reshape(-1) for p in kernel.parameters()])
    finally:
        native.usable = saved


def run(repeats: int = 30, quiet: bool = False) -> dict:
    torch.manual_seed(0)
    kernel = AttentiveKernel(2).double()
    implementations = ["native", "torch", "paper"] if native.library() is not None else ["torch", "paper"]
    rows = {}
    for case, (n1, n2) in CASES.items():
        x1 = torch.rand(n1, 2, dtype=torch.float64) * 2 - 1
        x2 = None if n2 is None else torch.rand(n2, 2, dtype=torch.float64) * 2 - 1
        G = torch.randn(n1, n1 if n2 is None else n2, dtype=torch.float64)
        row = {}
        reference = {kind: evaluate(kernel, "paper", x1, x2, g) for kind, g in (("forward", None), ("grad", G))}
        for impl in implementations:
            K, _ = evaluate(kernel, impl, x1, x2)
            _, grad = evaluate(kernel, impl, x1, x2, G)
            row[impl] = {
                "forward_s": median_time(lambda: evaluate(kernel, impl, x1, x2), repeats),
                "forward_backward_s": median_time(lambda: evaluate(kernel, impl, x1, x2, G), repeats),
                "max_abs_diff_vs_paper": float((K - reference["forward"][0]).abs().max()),
                "grad_rel_diff_vs_paper": float((grad - reference["grad"][1]).norm() / reference["grad"][1].norm()),
            }
        for impl in implementations[:-1]:
            row[impl]["speedup_forward_vs_paper"] = row["paper"]["forward_s"] / row[impl]["forward_s"]
            row[impl]["speedup_forward_backward_vs_paper"] = (
                row["paper"]["forward_backward_s"] / row[impl]["forward_backward_s"]
            )
        rows[case] = row
        if not quiet:
            print(
                case,
                {
                    impl: (round(r["forward_s"] * 1e3, 2), round(r["forward_backward_s"] * 1e3, 2))
                    for impl, r in row.items()
                },
                "ms (forward, forward+backward)",
                flush=True,
            )
    return {"config": {"repeats": repeats, "num_lengthscales": 10, "implementations": implementations}, "cases": rows}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    out = run(args.repeats, args.quiet)
    print("->", write("bench_kernel", out))
    return out


if __name__ == "__main__":
    main()
