"""``onlinegp bench verify``: run kept results again and report every number that no longer reproduces exactly.

A kept run (``results/<bench>/<key>/``, see :mod:`onlinegp.experiments.bench.runner`) names its job function and summary
patterns in ``spec.json``. Verifying it runs that job on its config into a scratch directory, in this process, and
compares the job's value (``DONE.json``) and every kept summary file with the committed ones: CSV cells and JSON
values exactly, ``.npz`` arrays bit for bit, other files byte for byte. Wall-clock figures (columns and keys named
``*time``, ``*_s``, ``*seconds``, ``rate``) are left out of the comparison: they are the machine's, not the code's.

Only runs of this package version are expected to reproduce (the version is part of their key); runs of older
versions are history and are reported as such unless named explicitly.
"""

from __future__ import annotations

import csv
import importlib
import json
import random
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .runner import MARKER, SPEC_FILE, JobFn, _execute, code_version, machine_kind

TIMING = re.compile(r"(time|_s|seconds|rate)$")  # wall-clock figures: not compared


@dataclass(frozen=True)
class KeptRun:
    """One run of the results tree: ``name`` is ``<bench>/<key>``."""

    path: Path
    spec: dict
    marker: dict

    @property
    def name(self) -> str:
        return f"{self.path.parent.name}/{self.path.name}"

    def matches(self, name: str) -> bool:
        """Named by ``<bench>/<key>``, its bench, its run id or ``<bench>/<run id>``."""
        bench, run_id = self.path.parent.name, self.spec.get("run_id")
        return name in (self.name, bench, run_id, f"{bench}/{run_id}")

    @property
    def version(self) -> str:
        return str(self.marker.get("code") or "").split(" ")[0]


@dataclass
class Verdict:
    """``status``: 'reproduced', 'differs', 'failed' (the job raised) or 'skipped' (another version, or no job)."""

    run: KeptRun
    status: str
    differences: list[str]
    seconds: float = 0.0
    #: fields the code writes now that the kept run lacks (a newly reported quantity): noted, not a difference,
    #: since every number that was kept still reproduces
    new_fields: list[str] = field(default_factory=list)


def kept_runs(results: str | Path) -> list[KeptRun]:
    """Every finished run of the results tree, sorted by name."""
    runs = []
    for path in sorted(Path(results).glob(f"*/*/{MARKER}")):
        spec_path = path.parent / SPEC_FILE
        if spec_path.is_file() and not path.parent.name.startswith("."):
            runs.append(KeptRun(path.parent, json.loads(spec_path.read_text()), json.loads(path.read_text())))
    return runs


def choose(runs: Sequence[KeptRun], names: Sequence[str] = (), sample: int | None = None, seed: int = 0) -> list:
    """The runs to verify: those named (``<bench>/<key>`` or a run id, e.g. ``coast/poam/seed-0``; a bench name
    takes all its runs), else a seeded random ``sample`` of the runs of this package version (all when None)."""
    from ... import __version__

    if names:
        missing = [n for n in names if not any(r.matches(n) for r in runs)]
        if missing:
            raise ValueError(
                f"no kept run is named {', '.join(map(repr, missing))}: name <bench>/<key>, a bench or a run id"
            )
        chosen = [r for r in runs if any(r.matches(n) for n in names)]
        return chosen
    current = [r for r in runs if r.version == __version__]
    if sample is None or sample >= len(current):
        return current
    return sorted(random.Random(seed).sample(current, sample), key=lambda r: r.name)


def _job(name: str) -> JobFn:
    module, _, function = name.partition(":")
    return getattr(importlib.import_module(module), function)


NEW_FIELD = "only in the new run"


def _compare(committed: Any, now: Any, where: str, out: list[str]) -> None:
    """Append to ``out`` every place where two JSON-like values differ (wall-clock keys left out)."""
    if isinstance(committed, dict) and isinstance(now, dict):
        for key in sorted(set(committed) | set(now)):
            if TIMING.search(str(key)):
                continue
            if key not in committed or key not in now:
                out.append(f"{where}.{key}: {'only in the committed run' if key in committed else NEW_FIELD}")
            else:
                _compare(committed[key], now[key], f"{where}.{key}", out)
    elif isinstance(committed, list) and isinstance(now, list) and len(committed) == len(now):
        for i, (a, b) in enumerate(zip(committed, now)):
            _compare(a, b, f"{where}[{i}]", out)
    elif committed != now and not (_is_nan(committed) and _is_nan(now)):
        out.append(f"{where}: committed {committed!r}, now {now!r}")


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and value != value


def _read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def compare_files(committed: Path, now: Path, rel: str) -> list[str]:
    """The differences between a committed summary file and the same file of the new run."""
    a, b = committed / rel, now / rel
    if not b.is_file():
        return [f"{rel}: not written by the new run"]
    out: list[str] = []
    if rel.endswith(".csv"):
        _compare(_read_csv(a), _read_csv(b), rel, out)
    elif rel.endswith(".json"):
        _compare(json.loads(a.read_text()), json.loads(b.read_text()), rel, out)
    elif rel.endswith(".npz"):
        with np.load(a) as x, np.load(b) as y:
            if sorted(x.files) != sorted(y.files):
                out.append(f"{rel}: arrays {sorted(x.files)} committed, {sorted(y.files)} now")
            out += [
                f"{rel}[{k}]: arrays differ"
                for k in x.files
                if k in y.files and not np.array_equal(x[k], y[k], equal_nan=True)
            ]
    elif a.read_bytes() != b.read_bytes():
        out.append(f"{rel}: contents differ")
    return out


def split_new_fields(differences: list[str]) -> tuple[list[str], list[str]]:
    """The differences proper, and the fields only the new run writes (one name per field, row indices dropped)."""
    added = {re.sub(r"\[\d+\]", "", d.removesuffix(f": {NEW_FIELD}")) for d in differences if d.endswith(NEW_FIELD)}
    return [d for d in differences if not d.endswith(NEW_FIELD)], sorted(added)


def verify_run(run: KeptRun) -> Verdict:
    """Run ``run``'s job again on its config into a scratch directory and compare its numbers with the kept ones."""
    job = run.spec.get("job")
    if not job:
        return Verdict(run, "skipped", ["spec.json names no job (kept before runs recorded theirs)"])
    with tempfile.TemporaryDirectory(prefix="onlinegp-verify-") as scratch:
        outcome = _execute(_job(job), run.spec["config"], scratch)
        if not outcome["ok"]:
            return Verdict(run, "failed", [outcome["error"].strip().splitlines()[-1]], outcome["seconds"])
        differences: list[str] = []
        _compare(run.marker.get("value"), outcome["value"], "value", differences)
        for path in sorted(run.path.rglob("*")):
            rel = path.relative_to(run.path).as_posix()
            if path.is_file() and rel not in (MARKER, SPEC_FILE):
                differences += compare_files(run.path, Path(scratch), rel)
    differences, new_fields = split_new_fields(differences)
    if len(differences) > 12:
        differences = differences[:12] + [f"... {len(differences) - 12} more"]
    if differences and run.marker.get("machine") != machine_kind():
        made = run.marker.get("machine") or "not recorded"
        differences.insert(
            0, f"made on another machine kind ({made}, here {machine_kind()}): the last digits follow the CPU"
        )
    return Verdict(run, "differs" if differences else "reproduced", differences, outcome["seconds"], new_fields)


def verify(
    results: str | Path,
    names: Sequence[str] = (),
    sample: int | None = None,
    seed: int = 0,
    echo: Callable[[str], None] = print,
) -> list[Verdict]:
    """Verify the chosen runs (:func:`choose`) one after another, echoing each verdict as it comes."""
    from ... import __version__

    runs = choose(kept_runs(results), names, sample, seed)
    if not runs:
        raise ValueError(f"no kept run of version {__version__} under {results}: name runs to verify older ones")
    echo(f"verifying {len(runs)} kept run(s) with {code_version()}")
    verdicts = []
    for run in runs:
        verdict = verify_run(run)
        verdicts.append(verdict)
        made = run.marker.get("code")
        echo(f"{verdict.status:10s} {run.name} ({run.spec.get('run_id')}, made by {made}, {verdict.seconds:.0f} s)")
        for line in verdict.differences[:8]:
            echo(f"    {line}")
        if verdict.new_fields:
            echo(f"    new fields, not in the kept run: {', '.join(verdict.new_fields)}")
    return verdicts
