"""The timing suite's one runner: every benchmark of ``registry.py`` (each writes ``results/<name>.json``), then
``results/SUMMARY.md``.

Each benchmark runs in its own process with the same thread setting (``--threads``, default 1: on a shared
2-core machine one thread per process is the stable choice, and both sides of every ratio use the same setting).
The opt-in benchmarks (the registry's ``opt_in``: minutes long, or for a GPU) run only by name (``--only NAME``) or
with their option (``--mission``); ``--missions-accuracy`` also compares 3 default missions before/after the speed
work. ``--only NAME ...`` runs a subset; ``--summary`` only rewrites SUMMARY.md from the result files; ``--table``
prints the registry's table of benchmarks (as benchmarks/README.md shows it).

    python benchmarks/perf/run.py [--mission] [--threads 1] [--only bench_poam_epoch] [--summary]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import registry  # noqa: E402
from common import RESULTS, read_result  # noqa: E402

ROOT = HERE.parents[1]


def load(name: str) -> dict | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def fmt(x, digits: int = 3) -> str:
    return f"{x:.{digits}g}" if isinstance(x, (int, float)) else str(x)


def summary_markdown() -> str:
    lines = [
        "# Benchmark summary",
        "",
        "Written by `benchmarks/perf/run.py` from `benchmarks/perf/results/*.json`.",
        "",
    ]
    epoch = load("bench_poam_epoch")
    if epoch:
        s, m = epoch["summary"], epoch["machine"]
        lines += [
            "## POAM decision epoch: onlinegp vs stock GPyTorch (paper implementation)",
            "",
            f"M = {epoch['config']['num_inducing']}, {epoch['config']['num_steps']} Adam steps, batch "
            f"{epoch['config']['batch_size']}, Attentive Kernel, float64; median over "
            f"{epoch['config']['epochs']} epochs; {m['torch_threads']} torch thread(s), load average "
            f"{fmt(m['load_average'][0] if m['load_average'] else 'n/a')} at the end.",
            "",
            "| | stock GPyTorch | onlinegp | ratio (target ≥ 5) |",
            "| --- | --- | --- | --- |",
            f"| epoch, wall s | {fmt(s['stock_epoch_s'])} | {fmt(s['ours_epoch_s'])} | {fmt(s['ratio'])} |",
            f"| epoch, CPU s | {fmt(s['stock_epoch_cpu_s'])} | {fmt(s['ours_epoch_cpu_s'])} | {fmt(s['ratio_cpu'])} |",
        ]
        if "sketch_epoch_s" in s:
            lines.append(
                f"| epoch, onlinegp sketch={epoch['config'].get('sketch')} (unbiased M-step sketch), wall s | "
                f"{fmt(s['stock_epoch_s'])} | {fmt(s['sketch_epoch_s'])} | {fmt(s['ratio_sketch'])} |"
            )
        if "ours32_epoch_s" in s:
            lines.append(
                f"| epoch, onlinegp float32, wall s | {fmt(s['stock_epoch_s'])} | {fmt(s['ours32_epoch_s'])} | "
                f"{fmt(s['ratio32'])} |"
            )
        if s.get("float32_failures"):
            lines.append(f"| onlinegp float32 | failed: {s['float32_failures'][0][:200]} | | |")
        if "stock_fusedak_epoch_s" in s:
            lines.append(
                f"| epoch, stock with onlinegp's fused AK, wall s | {fmt(s['stock_fusedak_epoch_s'])} | "
                f"{fmt(s['ours_epoch_s'])} | {fmt(s['stock_fusedak_epoch_s'] / s['ours_epoch_s'])} |"
            )
        for n in (2000, 2500):
            lines.append(
                f"| predict {n} points, s | {fmt(s[f'predict{n}_stock_s'])} | {fmt(s[f'predict{n}_ours_s'])} | "
                f"{fmt(s[f'predict{n}_stock_s'] / s[f'predict{n}_ours_s'])} |"
            )
        if "predict2500_cold_ours_s" in s:
            lines.append(
                f"| predict 2500 points, first call after an update, s | {fmt(s['predict2500_stock_s'])} | "
                f"{fmt(s['predict2500_cold_ours_s'])} | "
                f"{fmt(s['predict2500_stock_s'] / s['predict2500_cold_ours_s'])} |"
            )
        sketched = (
            f"; over the sketched epoch: {fmt(s['predict2500_ours_s'] / s['sketch_epoch_s'])}, first call "
            f"after an update {fmt(s['predict2500_cold_over_sketch_epoch'])}."
            if "predict2500_cold_over_sketch_epoch" in s
            else "."
        )
        lines += [
            "",
            f"Prediction of 2500 points / exact onlinegp epoch: {fmt(s['predict2500_over_epoch'])} "
            "(target ≤ 0.1)" + sketched,
            f"Largest hyper-parameter difference after an epoch, onlinegp vs stock: {fmt(s['param_maxdiff'])} "
            "(same work, same result).",
            "",
            "Phases (median seconds):",
            "",
            "| phase | stock | onlinegp |",
            "| --- | --- | --- |",
        ]
        ours = s["ours_phases_s"]
        stock = s["stock_phases_s"]
        lines += [
            f"| inducing + variational | {fmt(stock['inducing'] + stock['variational'])} | "
            f"{fmt(ours.get('inducing+variational', float('nan')))} |",
            f"| hyper-parameter steps | {fmt(stock['hyperparameters'])} | {fmt(ours.get('hyperparameters'))} |",
            f"| predictor (onlinegp only) | – | {fmt(ours.get('predictor'))} |",
            "",
        ]
    scaling = load("bench_scaling")
    if scaling:
        lines += [
            "## Constant time: update (60 points) as the data grow",
            "",
            "| method | "
            + " | ".join(f"N = {n}, s" for n in scaling["config"]["checkpoints"])
            + " | ratio (target ≤ 1.25) | CPU ratio | CPU per bound evaluation ratio | state size ratio |",
            "| --- | " + " | ".join("---" for _ in scaling["config"]["checkpoints"]) + " | --- | --- | --- | --- |",
        ]
        for name, r in scaling["methods"].items():
            if "skipped" in r:
                lines.append(f"| {name} | skipped: {r['skipped']} |")
                continue
            lines.append(
                f"| {name} | "
                + " | ".join(fmt(row["update_s"]) for row in r["rows"])
                + f" | {fmt(r['ratio'])} | {fmt(r['ratio_cpu'])} | {fmt(r.get('ratio_cpu_per_evaluation', '–'))} "
                f"| {fmt(r['state_ratio'])} |"
            )
        lines.append("")
    acc = load("bench_accuracy")
    if acc:
        lines += [
            "## Accuracy before/after the speed work (POAM, fixed streaming problem, "
            f"{len(acc['config']['seeds'])} seeds)",
            "",
            "| variant | RMSE (mean) | NLPD (mean) | update CPU s (total) |",
            "| --- | --- | --- | --- |",
        ]
        for v, d in acc["streaming"].items():
            lines.append(
                f"| {v} | {fmt(d['rmse']['mean'], 4)} | {fmt(d['nlpd']['mean'], 4)} | "
                f"{fmt(d['update_cpu_s']['mean'])} |"
            )
        for v, errors in acc.get("failures", {}).items():
            lines.append(f"| {v} | failed: {'; '.join(errors)[:300]} | | |")
        missions = (load("bench_accuracy_missions") or {}).get("missions")
        if missions:
            workers = (load("bench_accuracy_missions") or {}).get("config", {}).get("workers", 1)
            lines += [
                "",
                f"Default missions (valley-ridges, 5000 samples), mean over seeds ({workers} at a time: "
                "compare update times only when that is 1):",
                "",
                "| mission variant | seeds | SMSE (mean) | MSLL (mean) | update s (total) |",
                "| --- | --- | --- | --- | --- |",
            ]
            for v, d in missions.items():
                lines.append(
                    f"| {v} | {len(d['smse']['per_seed'])} | {fmt(d['smse']['mean'], 4)} | "
                    f"{fmt(d['msll']['mean'], 4)} | {fmt(d['update_s_total']['mean'])} |"
                )
        lines.append("")
    mission = load("bench_mission")
    if mission:
        lines += [
            "## Default mission end to end",
            "",
            f"Wall time {fmt(mission['wall_s'])} s ({fmt(mission['speedup_vs_paper'])}x faster than the paper "
            f"implementation's 6.5 min; target ≥ 5), peak memory {fmt(mission['peak_rss_mib'])} MiB, "
            f"{mission['epochs']} epochs, model updates {fmt(mission['total_update_s'])} s; final "
            + ", ".join(f"{k.upper()} {fmt(v, 4)}" for k, v in mission["final"].items())
            + ".",
            "",
        ]
    kernel = load("bench_kernel")
    if kernel:
        impls = kernel["config"]["implementations"]
        lines += [
            "## The Attentive Kernel alone (ms, median; forward / forward + backward to the network)",
            "",
            "| case | " + " | ".join(impls) + " | max abs / grad rel diff vs paper |",
            "| --- |" + " --- |" * (len(impls) + 1),
        ]
        for case, row in kernel["cases"].items():
            diffs = ", ".join(
                f"{i} {fmt(row[i]['max_abs_diff_vs_paper'], 2)} / {fmt(row[i]['grad_rel_diff_vs_paper'], 2)}"
                for i in impls[:-1]
            )
            lines.append(
                f"| {case} | "
                + " | ".join(
                    f"{fmt(row[i]['forward_s'] * 1e3)} / {fmt(row[i]['forward_backward_s'] * 1e3)}" for i in impls
                )
                + f" | {diffs} |"
            )
        lines.append("")
    known = {
        "bench_poam_epoch",
        "bench_scaling",
        "bench_accuracy",
        "bench_accuracy_missions",
        "bench_mission",
        "bench_kernel",
    }
    others = sorted(p.stem for p in RESULTS.glob("bench_*.json") if p.stem not in known)
    if others:
        lines += ["## Other benchmarks", ""] + [f"- `{name}`: see `results/{name}.json`" for name in others] + [""]
    lines += device_markdown(load("bench_device_h100"))
    return "\n".join(lines + registry_markdown())


def registry_markdown() -> list[str]:
    """The benchmarks of the suite (registry.py) and, per result file, the envelope it was written in."""
    lines = ["## The benchmarks (`benchmarks/perf/registry.py`)", "", registry.markdown_table().rstrip("\n"), ""]
    lines += [
        "Result files (`results/*.json`; the envelope of each: code version, torch threads, 1-minute load average at "
        "the end):",
        "",
        "| file | benchmark | code | torch threads | load average |",
        "| --- | --- | --- | --- | --- |",
    ]
    owner = {p.name: b.name for b in registry.BENCHMARKS for r in b.results for p in RESULTS.glob(r)}
    for path in sorted(RESULTS.glob("*.json")):
        m = read_result(path)["machine"]
        load = m.get("load_average")
        lines.append(
            f"| `{path.name}` | {owner.get(path.name, '–')} | {m.get('code', '–')} | {m.get('torch_threads', '–')} | "
            f"{fmt(load[0]) if load else '–'} |"
        )
    return [*lines, ""]


def device_markdown(device: dict | None) -> list[str]:
    """The CPU/CUDA table of ``bench_device.py`` (run on a GPU machine, saved as ``bench_device_<gpu>.json``)."""
    if not device:
        return []
    m, c = device["machine"], device["settings"]
    lines = [
        f"## CPU and CUDA, one run on one machine ({device['gpu']}, {m['cpus']} CPU cores)",
        "",
        f"{c['batches']} batches of {c['batch']} points of the 2-D field, float64, each method's defaults; median "
        f"update after {c['warmup']}; prediction at {c['test']} points; torch {m['torch']}, "
        f"{m['torch_threads']} CPU threads; code {m['code']}.",
        "",
        "| method | M | CPU update, ms | CUDA update, ms | ratio | CPU predict, ms | CUDA predict, ms | "
        "largest mean difference / std |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in device["rows"]:
        cpu, gpu = r.get("cpu", {}), r.get("cuda", {})
        if "update_s" not in cpu or "update_s" not in gpu:
            lines.append(f"| {r['method']} | {r['M'] or '–'} | {cpu.get('error', '')} | {gpu.get('error', '')} |")
            continue
        lines.append(
            f"| {r['method']} | {r['M'] or '–'} | {fmt(cpu['update_s'] * 1e3)} | {fmt(gpu['update_s'] * 1e3)} | "
            f"{fmt(r['speedup'])} | {fmt(cpu['predict_s'] * 1e3)} | {fmt(gpu['predict_s'] * 1e3)} | "
            f"{fmt(r['max_mean_difference_over_std'], 2)} |"
        )
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag in registry.flags().values():
        parser.add_argument(f"--{flag.name}", action="store_true", help=flag.help)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", nargs="+", default=None, choices=sorted(registry.by_name()), metavar="NAME")
    parser.add_argument("--summary", action="store_true", help="only rewrite SUMMARY.md from existing results")
    parser.add_argument("--table", action="store_true", help="print the registry's table of benchmarks and exit")
    args = parser.parse_args(argv)
    if args.table:
        print(registry.markdown_table(), end="")
        return 0
    failed = [] if args.summary else run_suite(args)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "SUMMARY.md").write_text(summary_markdown())
    print(f"wrote {RESULTS / 'SUMMARY.md'}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def run_suite(args: argparse.Namespace) -> list[str]:
    """Run the registry's benchmarks that ``args`` select, each in its own process; the names of those that failed."""
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads), MPLBACKEND="Agg")
    failed = []
    for bench in registry.BENCHMARKS:
        given = [f for f in bench.flags if getattr(args, f.name.replace("-", "_"))]
        if args.only and bench.name not in args.only:
            continue
        if bench.opt_in and not args.only and not given:
            options = " or ".join([f"--only {bench.name}", *(f"--{f.name}" for f in bench.flags)])
            print(f"skip {bench.name} (opt-in, {bench.opt_in}: {options})")
            continue
        extra = [a for f in given for a in f.args]
        print(f"== {bench.name}", flush=True)
        t0 = time.perf_counter()
        code = subprocess.run([sys.executable, str(bench.script), *bench.args, *extra], env=env, cwd=ROOT).returncode
        print(f"== {bench.name}: exit {code} after {time.perf_counter() - t0:.0f} s", flush=True)
        if code:
            failed.append(bench.name)
    return failed


if __name__ == "__main__":
    sys.exit(main())
