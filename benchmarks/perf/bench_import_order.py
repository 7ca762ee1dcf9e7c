"""The README quick start and the examples with torch imported before or after onlinegp, beside a busy core.

Each target runs in a fresh process, in a temporary working directory, with no ``OMP_*``/``MKL_*`` variables (a new
user's shell), as ``import FIRST; runpy.run_path(TARGET)`` for FIRST = torch and onlinegp, while a process spins on
one core. ``--old`` also runs each target as onlinegp ran after torch before it applied its thread choice to a
loaded torch: torch's default threads, spin-waiting (``OMP_NUM_THREADS`` = torch's default). Wall seconds and the
1-minute load average before each run go to ``results/import-order.md``.

    python benchmarks/perf/bench_import_order.py [--targets quickstart,stream_tabular,...] [--old quickstart]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from onlinegp.experiments.bench.runner import code_version

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.stem for p in (ROOT / "examples").glob("*.py"))
ORDERS = {"torch first": "import torch", "onlinegp first": "import onlinegp"}


def quick_start(path: Path) -> Path:
    """The README's quick start (its first ``python`` block after "## Quick start") written to ``path``."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Quick start.*?```python\n(.*?)```", readme, re.S)
    path.write_text(block.group(1))
    return path


def run(script: Path, first: str, env: dict, timeout: float) -> tuple[float, float]:
    """(wall seconds, load average before) of ``script`` after ``first``; inf when it fails or times out."""
    load = os.getloadavg()[0]
    code = f"{first}; import runpy; runpy.run_path({str(script)!r}, run_name='__main__')"
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as cwd:
        try:
            done = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, timeout=timeout)
            ok = done.returncode == 0
        except subprocess.TimeoutExpired:
            ok = False
    return (time.perf_counter() - t0 if ok else float("inf")), load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default=",".join(["quickstart", *EXAMPLES]))
    parser.add_argument("--old", default="", help="targets also run with torch's default spin-waiting threads")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--repeats", type=int, default=3, help="runs per cell, the orders interleaved; the median")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "perf" / "results" / "import-order.md"))
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "MKL_", "GOMP_"))}
    torch_default = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"], env=env, capture_output=True, text=True
    ).stdout.strip()
    rows = []
    spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for target in args.targets.split(","):
                script = quick_start(Path(tmp) / "quickstart.py") if target == "quickstart" else None
                script = script or ROOT / "examples" / f"{target}.py"
                variants = {order: (first, env) for order, first in ORDERS.items()}
                if target in args.old.split(","):
                    variants["torch first, before"] = ("import torch", {**env, "OMP_NUM_THREADS": torch_default})
                runs: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
                for _ in range(args.repeats):  # interleaved, so a drifting load reaches every order alike
                    for name, (first, variant_env) in variants.items():
                        runs[name].append(run(script, first, variant_env, args.timeout))
                cells = {name: (statistics.median(w for w, _ in r), max(la for _, la in r)) for name, r in runs.items()}
                rows.append((target, cells))
                print(target, {k: f"{w:.1f} s (load {la:.1f})" for k, (w, la) in cells.items()}, flush=True)
    finally:
        spin.kill()
    columns = [*ORDERS, *(["torch first, before"] if args.old else [])]
    lines = [
        "# Import order beside a busy core",
        "",
        f"`python benchmarks/perf/bench_import_order.py --targets {args.targets}"
        + (f" --old {args.old}" if args.old else "")
        + f" --repeats {args.repeats}`: median wall seconds of {args.repeats} interleaved runs (the highest 1-minute load "
        f"average before one of them), {os.cpu_count()} CPUs, torch's "
        f"default {torch_default} threads, beside `python -c 'while True: pass'`. \"before\": onlinegp imported "
        "after torch before it applied its thread choice to a loaded torch (torch's default threads, spin-waiting). "
        f"Code: {code_version()}.",
        "",
        "| target | " + " | ".join(columns) + " | torch first / onlinegp first |",
        "| --- |" + " --- |" * (len(columns) + 1),
    ]
    for target, cells in rows:
        text = [f"{cells[c][0]:.1f} ({cells[c][1]:.1f})" if c in cells else "" for c in columns]
        ratio = cells["torch first"][0] / cells["onlinegp first"][0]
        lines.append(f"| {target} | " + " | ".join(text) + f" | {ratio:.2f} |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
