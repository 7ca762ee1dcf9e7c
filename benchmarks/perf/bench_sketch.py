"""How noisy is the sketched M-step gradient? Against the mini-batch noise the M-step already has.

A POAM model (M = 500, Attentive Kernel) absorbs ``--samples`` points of the benchmark stream; then, at its state,
the fixed-q ELBO gradient with respect to every hyper-parameter is computed on one mini-batch of 256 with the exact
covariance root and with ``--draws`` sketches of p columns each (the library's CountSketch
``posterior.sketch_root`` and, for comparison, a Gaussian sketch R Ω/√p). Reported: the mean relative error
‖g_sketch − g‖ / ‖g‖, the relative error of the sketches' average (≈ 0 if unbiased, shrinking like 1/√draws), and
the relative spread of the exact gradient over 20 different mini-batches (the noise Adam already copes with).

    python benchmarks/perf/bench_sketch.py [--samples 3000] [--draws 50] [--probes 16 32 64 128]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BOUNDS, stream, write  # noqa: E402

from onlinegp import POAM  # noqa: E402
from onlinegp.kernels import CrossCovariance, diagonal  # noqa: E402
from onlinegp.objectives import svgp_elbo_cov  # noqa: E402
from onlinegp.posterior import sketch_root, with_jitter  # noqa: E402


def gaussian_sketch(root: torch.Tensor, p: int, generator: torch.Generator) -> torch.Tensor:
    return root @ torch.randn(root.shape[-1], p, generator=generator, dtype=root.dtype) / p**0.5


def run(samples: int = 3000, draws: int = 50, probes=(16, 32, 64, 128), seed: int = 0, quiet: bool = False) -> dict:
    torch.manual_seed(seed)  # the attention networks' initial weights
    X, y = stream(samples, seed=seed)
    model = POAM(2, num_inducing=500, x_bounds=BOUNDS, seed=seed)
    for lo in range(0, samples, 250):
        model.update(X[lo : lo + 250], y[lo : lo + 250])
    Xa, ya = model.data.data
    n, q = Xa.shape[0], model.q
    cross = CrossCovariance(model.kernel, model.Z)
    params = list(model.kernel.parameters()) + list(model.likelihood.parameters())

    def gradient(idx: torch.Tensor, root: torch.Tensor) -> torch.Tensor:
        for p in params:
            p.grad = None
        xb = Xa[idx]
        Kuu, Kub = cross(xb)
        svgp_elbo_cov(
            with_jitter(Kuu),
            Kub,
            diagonal(model.kernel, xb),
            model.noise,
            q.mean,
            root,
            q.logdet,
            ya[idx],
            n,
            model.jitter,
        ).backward()
        return torch.cat([p.grad.reshape(-1) for p in params])

    g = torch.Generator().manual_seed(seed + 1)
    idx = torch.randint(n, (256,), generator=g)
    exact = gradient(idx, q.root)
    batches = torch.stack([gradient(torch.randint(n, (256,), generator=g), q.root) for _ in range(20)])
    centre = batches.mean(0)
    out = {
        "config": {"samples": samples, "draws": draws, "num_inducing": 500, "batch": 256, "seed": seed},
        "minibatch_relative_spread": float((batches - centre).norm(dim=1).mean() / centre.norm()),
        "sketches": {},
    }
    for name, sketch in (("countsketch", sketch_root), ("gaussian", gaussian_sketch)):
        for p in probes:
            grads = torch.stack([gradient(idx, sketch(q.root, p, g)) for _ in range(draws)])
            row = {
                "relative_error": float((grads - exact).norm(dim=1).mean() / exact.norm()),
                "relative_error_of_mean": float((grads.mean(0) - exact).norm() / exact.norm()),
            }
            out["sketches"][f"{name}_p{p}"] = row
            if not quiet:
                print(name, p, {k: round(v, 5) for k, v in row.items()}, flush=True)
    if not quiet:
        print("mini-batch relative spread", round(out["minibatch_relative_spread"], 5))
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=3000)
    parser.add_argument("--draws", type=int, default=50)
    parser.add_argument("--probes", nargs="+", type=int, default=[16, 32, 64, 128])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    out = run(args.samples, args.draws, tuple(args.probes), quiet=args.quiet)
    print("->", write("bench_sketch", out))
    return out


if __name__ == "__main__":
    main()
