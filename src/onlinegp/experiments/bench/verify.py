"""``onlinegp bench verify``: run kept results again and report every number that no longer reproduces exactly.

A kept run (``results/<bench>/<key>/``, see :mod:`onlinegp.experiments.bench.runner`) names its job function and summary
patterns in ``spec.json``. Verifying it runs that job on its config into a scratch directory, in this process, and
compares the job's value (``DONE.json``) and every kept summary file with the committed ones: CSV cells and JSON
values exactly, ``.npz`` arrays bit for bit, other files byte for byte. Wall-clock figures (columns and keys named
``*time``, ``*_s``, ``*seconds``, ``rate``) and load averages are left out of the comparison: they are the machine's,
not the code's.

Only runs of this package version are expected to reproduce (the version is part of their key); runs of older
versions are history and are reported as such unless named explicitly.

Exact reproduction is expected of a run made in the portable numeric mode (:mod:`onlinegp.portable`) when verified
in it, on any CPU, and of a default-mode run on its own machine kind. A default-mode run verified on another kind
or in the other mode moves in its last digits, and each result of its job that moved is put beside the spread of
the same result over the run's repeats (the kept runs of its bench, version and mode whose configs differ only in
seed, split or trial): ``close`` when every one moved by less than that spread.
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

from ...kernels import native
from .runner import MARKER, SPEC_FILE, JobFn, _execute, code_version, machine_kind

TIMING = re.compile(r"(time|_s|seconds|rate|load_average)$")  # the machine's figures: not compared
#: config keys that tell a run's repeats apart: the runs that differ only in these are one table cell's spread
REPEAT_KEYS = ("seed", "split", "trial")


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

    @property
    def numerics(self) -> str:
        """The numeric mode the run was made in (runs kept before the mode existed were made in the default)."""
        return str(self.marker.get("numerics") or "default")

    def cell(self) -> tuple:
        """What the run is a repeat of: its bench, version, numeric mode and config without REPEAT_KEYS."""
        config = {k: v for k, v in self.spec.get("config", {}).items() if k not in REPEAT_KEYS}
        return self.path.parent.name, self.version, self.numerics, json.dumps(config, sort_keys=True)


@dataclass
class Verdict:
    """``status``: 'reproduced', 'close' (not exact, where exactness is not expected, but every moved result within
    its repeats' spread), 'differs', 'failed' (the job raised) or 'skipped' (another version, or no job)."""

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


def _numbers(value: Any, where: str = "value") -> dict[str, float]:
    """The numeric leaves of a job's value by path (wall-clock keys left out)."""
    if isinstance(value, dict):
        return {
            k: v
            for key, item in value.items()
            if not TIMING.search(str(key))
            for k, v in _numbers(item, f"{where}.{key}").items()
        }
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _numbers(item, f"{where}[{i}]").items()}
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {where: float(value)}
    return {}


def against_spread(committed: Any, now: Any, repeats: Sequence[KeptRun]) -> tuple[list[str], bool]:
    """Each numeric result that moved, beside the standard deviation of the same result over ``repeats`` (the kept
    runs of the same table cell); and whether every one moved by less than it."""
    before, after = _numbers(committed), _numbers(now)
    lines, within = [], True
    for where in sorted(k for k in before if k in after and before[k] != after[k]):
        cell = [n[where] for n in (_numbers(r.marker.get("value")) for r in repeats) if where in n]
        spread = float(np.std(cell, ddof=1)) if len(cell) >= 2 else float("nan")
        moved = abs(after[where] - before[where])
        within &= moved < spread  # False when there is no spread to compare with (NaN)
        ratio = f"{moved / spread:.2g} x" if spread > 0 else "no spread:"
        lines.append(
            f"{where}: committed {before[where]:.6g}, now {after[where]:.6g}: moved {moved:.3g}, {ratio} the std "
            f"over {len(cell)} repeat(s) ({spread:.3g})"
        )
    return lines, within


def verify_run(run: KeptRun, repeats: Sequence[KeptRun] = ()) -> Verdict:
    """Run ``run``'s job again on its config into a scratch directory and compare its numbers with the kept ones;
    ``repeats`` (the kept runs of its table cell, see :func:`against_spread`) judge a run not expected to be exact."""
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
    if not differences:
        return Verdict(run, "reproduced", [], outcome["seconds"], new_fields)
    mode_now, made_on = native.numerics(), run.marker.get("machine") or "not recorded"
    if run.numerics.startswith("portable"):
        if run.numerics == mode_now:  # portable on both sides: any CPU reproduces it, so this is the code's
            return Verdict(run, "differs", differences, outcome["seconds"], new_fields)
        why = f"made in the numeric mode '{run.numerics}', verified in '{mode_now}'"
        if not mode_now.startswith("portable"):
            why += ": `onlinegp --portable bench verify` reproduces it exactly"
    elif mode_now != "default":
        why = f"made in the default numeric mode (on machine kind {made_on}), verified in '{mode_now}'"
    elif made_on != machine_kind():
        why = f"made on another machine kind ({made_on}, here {machine_kind()}) in the default numeric mode"
    else:  # default mode on the same machine kind: exact reproduction expected
        return Verdict(run, "differs", differences, outcome["seconds"], new_fields)
    spread, within = against_spread(run.marker.get("value"), outcome["value"], repeats)
    lines = [f"{why}: the last digits follow the CPU", *spread, *differences]
    return Verdict(run, "close" if within and spread else "differs", lines, outcome["seconds"], new_fields)


def verify(
    results: str | Path,
    names: Sequence[str] = (),
    sample: int | None = None,
    seed: int = 0,
    echo: Callable[[str], None] = print,
) -> list[Verdict]:
    """Verify the chosen runs (:func:`choose`) one after another, echoing each verdict as it comes."""
    from ... import __version__

    every = kept_runs(results)
    runs = choose(every, names, sample, seed)
    if not runs:
        raise ValueError(f"no kept run of version {__version__} under {results}: name runs to verify older ones")
    echo(f"verifying {len(runs)} kept run(s) with {code_version()}, numeric mode '{native.numerics()}'")
    verdicts = []
    for run in runs:
        verdict = verify_run(run, [r for r in every if r.cell() == run.cell()])
        verdicts.append(verdict)
        made = f"made by {run.marker.get('code')}, {run.numerics}"
        echo(f"{verdict.status:10s} {run.name} ({run.spec.get('run_id')}, {made}, {verdict.seconds:.0f} s)")
        for line in verdict.differences[:8]:
            echo(f"    {line}")
        if verdict.new_fields:
            echo(f"    new fields, not in the kept run: {', '.join(verdict.new_fields)}")
    return verdicts
