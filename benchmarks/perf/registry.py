"""The timing suite, declared once: every benchmark of ``benchmarks/perf/`` with what it measures, whether a suite run
includes it, the arguments the runner gives it and the result files it writes (``benchmarks/perf/results/``).

``run.py`` runs the suite from this table and writes ``results/SUMMARY.md``, whose table of benchmarks is made
from it too; ``benchmarks/README.md`` shows the same table (``python benchmarks/perf/run.py --table``; a test
checks that they agree). A new benchmark is a ``bench_NAME.py`` here that writes through ``common.write`` (the result
files' envelope: ``common.ENVELOPE``) and an entry below.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Flag:
    """A runner option (``--NAME``) that gives a benchmark ``args``; for an opt-in benchmark it also runs it."""

    name: str
    help: str
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Benchmark:
    """One timing benchmark: ``bench_NAME.py`` beside this file.

    ``measures``: what it measures (markdown); ``results``: the file names (globs) it writes in ``results/``;
    ``opt_in``: why a plain suite run leaves it out (empty: the suite runs it; an opt-in one runs with ``--only NAME``
    or its :class:`Flag`); ``args``: what the runner passes it; ``flags``: the runner options that concern it.
    """

    name: str
    measures: str
    results: tuple[str, ...]
    opt_in: str = ""
    args: tuple[str, ...] = ()
    flags: tuple[Flag, ...] = field(default_factory=tuple)

    @property
    def script(self) -> Path:
        return HERE / f"{self.name}.py"


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "bench_poam_epoch",
        "one POAM decision epoch (M = 500, 10 Adam steps, batch 256, Attentive Kernel, float64) with onlinegp vs the "
        "same epoch in stock GPyTorch (`stock_gpytorch_poam.py`: `ApproximateGP` + `UnwhitenedVariationalStrategy` + "
        "`CholeskyVariationalDistribution` + `VariationalELBO`, the AK computed as the paper's code does), both started "
        "from the *same* state each epoch; phases, prediction of 2000/2500 points, a float32 model, and stock with "
        "onlinegp's fused AK",
        ("bench_poam_epoch.json", "bench_poam_epoch_*.json"),
    ),
    Benchmark(
        "bench_scaling",
        "update time (60-point batches) at N = 5 000 and 50 000 for POAM, OVC, OSGPR, WISKI (those registered), the "
        "model size M and checkpoint size; bound evaluations and CPU per evaluation for OSGPR",
        ("bench_scaling.json",),
    ),
    Benchmark(
        "bench_accuracy",
        "RMSE/NLPD of POAM on a fixed streaming problem over 3 seeds: the pre-speed-work arithmetic "
        "(`reference_path`), the exact M-step, the default sketched M-step, and float32; `--missions` adds default "
        "missions per variant (`--workers` at a time)",
        ("bench_accuracy.json", "bench_accuracy_missions.json"),
        flags=(
            Flag(
                "missions-accuracy",
                "bench_accuracy also compares 3 default missions before/after (tens of minutes)",
                ("--missions",),
            ),
        ),
    ),
    Benchmark(
        "bench_kernel",
        "the Attentive Kernel alone: k(Z, Z), k(Z, X_b), k(X_*, Z) forward and forward + backward, compiled routine "
        "vs PyTorch path vs the paper's per-length-scale loop, values and gradients checked",
        ("bench_kernel.json",),
    ),
    Benchmark(
        "bench_sketch",
        "the sketched M-step's gradient error (CountSketch and Gaussian, p = 16-128) against the mini-batch noise of "
        "the exact gradient",
        ("bench_sketch.json",),
    ),
    Benchmark(
        "bench_mission",
        "a full default mission (`onlinegp mission`): wall time, peak RSS, final metrics, and the wall time split by "
        "phase (updates, evaluation-grid and planner predictions, checkpoints, figures, start-up) from the mission's "
        "phase timer; `--compare SRC` alternates an older source tree with this one in the same conditions",
        ("bench_mission.json", "bench_mission_*.json"),
        opt_in="minutes",
        flags=(Flag("mission", "also run the full default mission (minutes)"),),
    ),
    Benchmark(
        "bench_ssgp_epoch",
        "SSGP++'s decision epoch with the per-batch `OnlineBound` against the plain `online_bound` from the same "
        "state, order alternated, with POAM on the same stream",
        ("bench_ssgp_epoch.json",),
    ),
    Benchmark(
        "bench_member_fit",
        "one L-BFGS fit of a WGPR member (the WGPR bench's kin40k OSGPR: M = 50, moved pseudo-inputs, batches of 100) "
        "with `StatisticsFit`'s closed-form gradient against autograd through `statistics_bound` and against "
        "`StatisticsFit` with gpytorch's kernel call, from the same state, order rotated: milliseconds per bound "
        "evaluation",
        ("bench_member_fit.json",),
    ),
    Benchmark(
        "bench_streaming",
        "update time per batch of POAM and SSGP++ (AK, batches of 256, 10 Adam steps) as the stream grows to N = 50 000 "
        "(M = 200) and 20 000 (M = 500); owned by the OSGPR work, see its docstring",
        ("streaming.json", "streaming_*.json"),
    ),
    Benchmark(
        "bench_wiski",
        "WISKI's update time per observation and checkpoint size as N grows (`--compare` an older tree), and its "
        "batch rule (`--batch`); owned by the WISKI work, see its docstring",
        ("wiski.json", "wiski-*.json"),
    ),
    Benchmark(
        "bench_reference",
        "the POAM paper's recorded streams replayed through onlinegp's POAM (default and exact M-step): accuracy beside "
        "the recorded SMSE/MSLL, update time beside the recorded `update_s`; needs the shared reference streams",
        ("bench_reference.json", "bench_reference_*.json", "ovc_reference.json", "ovc_reference.md", "*.npz"),
    ),
    Benchmark(
        "bench_device",
        "update and prediction times of the streaming methods on the CPU and on a CUDA device in one run, and how far "
        "the two devices' final means are apart (the H100 run is `bench_device_h100.json`)",
        ("bench_device_*.json",),
        opt_in="needs a GPU",
    ),
    Benchmark(
        "bench_threads",
        "missions and epochs at 1 and 2 threads (and 2 passive) quiet and beside a busy core",
        ("threads.json",),
        opt_in="minutes",
    ),
    Benchmark(
        "bench_portable",
        "the portable numeric mode's cost (`onlinegp.portable`): POAM epochs (M = 500, batches of 60) and "
        "`onlinegp mission --budget 800`, default against portable, one thread, fresh processes interleaved",
        ("portable.json",),
        opt_in="minutes",
    ),
    Benchmark(
        "bench_serve_load",
        "`onlinegp serve` under load: K vehicles posting one row at R Hz each (default K = 1, 4, 16 at 10 Hz for "
        "60 s) to a real service on loopback; acknowledgement latency p50/p99, updates per second, the largest "
        "backlog, the map's staleness (`--render` writes docs/results/serve-load.md)",
        ("bench_serve_load.json",),
        opt_in="minutes; needs the serve extra",
    ),
    Benchmark(
        "bench_import_order",
        "the README quick start and the examples with torch imported before or after onlinegp, beside a busy core",
        ("import-order.md",),
    ),
)


def by_name() -> dict[str, Benchmark]:
    return {b.name: b for b in BENCHMARKS}


def flags() -> dict[str, Flag]:
    """Every runner option the benchmarks declare, by name."""
    return {f.name: f for b in BENCHMARKS for f in b.flags}


def markdown_table() -> str:
    """The table of benchmarks (README and SUMMARY.md)."""
    lines = [
        "| benchmark | what it measures | in a suite run | results (`perf/results/`) |",
        "| --- | --- | --- | --- |",
    ]
    for b in BENCHMARKS:
        how = "yes" if not b.opt_in else f"opt-in ({b.opt_in}): `--only {b.name}`"
        how += "".join(f", `--{f.name}`" for f in b.flags if b.opt_in and not f.args)
        results = ", ".join(f"`{r}`" for r in b.results)
        lines.append(f"| `{b.name}.py` | {b.measures} | {how} | {results} |")
    return "\n".join(lines) + "\n"
