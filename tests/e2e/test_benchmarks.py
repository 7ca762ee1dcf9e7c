"""benchmarks/: the timing suite (perf/) and the studies (studies/) as their registries declare them, their result
files' one envelope, and the summary and README tables made from the registries."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
PERF, STUDIES = BENCHMARKS / "perf", BENCHMARKS / "studies"
#: the helpers beside the benchmarks (no registry entry)
HELPERS = {"common", "paper_code", "stock_gpytorch_poam", "registry", "run"}


def load(path: Path, monkeypatch):
    monkeypatch.syspath_prepend(str(PERF))
    monkeypatch.syspath_prepend(str(path.parent))
    spec = importlib.util.spec_from_file_location(f"benchmarks_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_benchmarks_holds_the_suite_and_the_studies_only():
    assert {p.name for p in BENCHMARKS.iterdir() if p.name != "__pycache__"} == {"README.md", "perf", "studies"}


def test_the_registries_name_every_script_and_every_result_file(monkeypatch):
    perf, studies = load(PERF / "registry.py", monkeypatch), load(STUDIES / "registry.py", monkeypatch)
    assert {b.name for b in perf.BENCHMARKS} == {p.stem for p in PERF.glob("*.py")} - HELPERS
    assert {s.name for s in studies.STUDIES} == {p.stem for p in STUDIES.glob("*.py")} - HELPERS
    assert all(b.script.is_file() for b in perf.BENCHMARKS) and all(s.script.is_file() for s in studies.STUDIES)
    claimed = {p.name for b in perf.BENCHMARKS for r in b.results for p in (PERF / "results").glob(r)}
    assert {p.name for p in (PERF / "results").iterdir()} - claimed == {"SUMMARY.md"}
    claimed = {p.name for s in studies.STUDIES for r in s.results for p in (STUDIES / "results").glob(r)}
    assert {p.name for p in (STUDIES / "results").iterdir()} - claimed == set(studies.RECORDS)


def test_every_result_file_reads_in_the_one_envelope(monkeypatch):
    common = load(PERF / "common.py", monkeypatch)
    files = sorted([*(PERF / "results").glob("*.json"), *(STUDIES / "results").glob("*.json")])
    assert len(files) > 30
    for path in files:
        envelope = common.read_result(path)
        assert isinstance(envelope["benchmark"], str) and isinstance(envelope["machine"], dict), path.name
    assert common.read_result(PERF / "results" / "streaming.json")["machine"]["torch_threads"] == 1  # was "threads"


def test_write_puts_the_envelope_around_a_result(tmp_path, monkeypatch):
    common = load(PERF / "common.py", monkeypatch)
    path = common.write("bench_x", {"config": {"n": 3}, "rows": [1.5]}, tmp_path)
    data = json.loads(path.read_text())
    assert list(data)[:2] == ["benchmark", "machine"] and data["rows"] == [1.5]
    assert set(common.machine()) <= set(data["machine"]) and common.read_result(path)["config"] == {"n": 3}


def test_the_summary_and_the_readme_are_made_from_the_registries(monkeypatch):
    run = load(PERF / "run.py", monkeypatch)
    assert run.summary_markdown() == (PERF / "results" / "SUMMARY.md").read_text(), (
        "run `python benchmarks/perf/run.py --summary` and commit SUMMARY.md"
    )
    readme = (BENCHMARKS / "README.md").read_text()
    assert run.registry.markdown_table() in readme, "paste `python benchmarks/perf/run.py --table` into the README"
    studies = load(STUDIES / "registry.py", monkeypatch)
    assert studies.markdown_table() in readme, "paste `python benchmarks/studies/registry.py` into the README"


@pytest.mark.parametrize("flag", ["--mission", "--missions-accuracy"])
def test_the_runner_takes_the_registrys_options(flag, monkeypatch):
    run = load(PERF / "run.py", monkeypatch)
    assert flag[2:] in run.registry.flags()
