"""One way to register a bench: every ``onlinegp bench`` command is a Bench of its module, its own options one
frozen dataclass that the command builds, its sweep run by :meth:`Bench.start`, and its runs keyed as before."""

import dataclasses
import hashlib
import importlib
from pathlib import Path

import pytest
import typer

from onlinegp.experiments.bench import CATALOGUE
from onlinegp.experiments.bench.protocol import Bench, default_out
from onlinegp.experiments.bench.runner import RunnerOptions, RunSpec
from onlinegp.experiments.cli import app

MODULES = ("poam", "wgpr", "fleet", "defaults", "vips", "wiski")
RESULTS = Path(__file__).resolve().parents[3] / "results"

#: a digest of every spec's run id and key (at version 0.5.0) for each sweep bench's default options: a changed config
#: changes its key, and kept runs are found by their key
DEFAULT_KEYS = {
    "defaults": "fb1ea55fb5301fc6",
    "fleet": "bd2b44fe1ba0cbf1",
    "poam-ablation": "83120c57d0695388",
    "poam-robustness": "f34a227b4ea734d3",
    "poam-table1": "05d23d2819ef4e16",
    "vips-magnetic": "27dd19fcd6574d8d",
    "vips-synthetic": "962e1450dc3257b8",
    "vips-table1": "9cd022c98b9d74b7",  # since 0.6.0 without the library's length-scale prior (the paper's)
    "wgpr": "600a30bb3f448b1b",
    "wiski-banana": "0546948a19ef4c96",
    "wiski-uci": "b08f423182d7967c",  # a sweep since 0.7.0 (before, a loop that kept nothing)
    "wiski-rank": "f0ed7096c5f4d930",
}
#: (version, at least this many of the default options' runs kept in results/ for it)
KEPT = {
    "defaults": ("0.5.0", 38),
    "fleet": ("0.4.0", 30),
    "poam-robustness": ("0.1.0", 20),
    "poam-table1": ("0.3.0", 50),
    "vips-synthetic": ("0.7.0", 40),
    "vips-table1": ("0.7.0", 45),
    "wgpr": ("0.7.0", 57),  # moved pseudo-inputs: toy, pumadyn32nm x 4 methods x 5; kin40k and lake in part
    "wiski-banana": ("0.3.0", 1),
    "wiski-rank": ("0.1.0", 13),
}


def _bench(name: str) -> Bench:
    return CATALOGUE[name]


def _params(name: str) -> dict:
    group = typer.main.get_command(app).commands["bench"]
    return {p.name: p for p in group.commands[name].params}


def test_every_bench_is_in_the_catalogue_once_and_has_a_command():
    found = {}
    for module in MODULES:
        for name, bench in importlib.import_module(f"onlinegp.experiments.bench.{module}").BENCHES.items():
            assert bench.name == name and name not in found and CATALOGUE[name] is bench
            found[name] = module
    assert set(found) == set(CATALOGUE)
    commands = typer.main.get_command(app).commands["bench"].commands
    assert list(commands) == [*CATALOGUE, "verify", "report"]


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_a_bench_command_takes_the_common_options_and_its_bench_options(name):
    bench = _bench(name)
    params = _params(name)
    assert params["out"].default == bench.out == default_out(name) == f"runs/{name}"
    assert {"quiet", "force"} <= params.keys()
    assert {"results", "no_results", "resume"} <= params.keys()
    fields = {f.name for f in dataclasses.fields(bench.options) if "help" in f.metadata}
    runner = {"results", "no_results", "resume", "kept_only", "workers", "backend", "address"}
    own = params.keys() - {"out", "quiet", "force"} - runner
    assert own == fields, f"{name}: the command's own options are not its options dataclass's: {own ^ fields}"
    assert dataclasses.is_dataclass(bench.options) and bench.options.__dataclass_params__.frozen
    bench.options()  # every option has a default


@pytest.mark.parametrize("name", sorted(DEFAULT_KEYS))
def test_default_options_give_the_runs_kept_today(name):
    bench = _bench(name)
    keys = sorted(f"{s.run_id} {s.key('0.5.0')}" for s in bench.specs(bench.options()))
    assert hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16] == DEFAULT_KEYS[name]
    if name in KEPT and RESULTS.is_dir():
        version, count = KEPT[name]
        kept = [s for s in bench.specs(bench.options()) if (RESULTS / name / s.key(version)).is_dir()]
        assert len(kept) >= count


def test_start_runs_the_sweep_between_specs_job_and_summarise(tmp_path):
    @dataclasses.dataclass(frozen=True)
    class Options:
        size: int = 2

    seen = []

    def summarise(out, sweep, options, quiet, log):
        seen.append((out, [r.status for r in sweep.runs], [s.run_id for s in sweep.specs], options.size, quiet))
        return "table"

    specs = lambda o: [RunSpec(f"r{i}", {"i": i}) for i in range(o.size)]  # noqa: E731
    bench = Bench("b", Options, specs, _job, summarise, threads=1, runs="runs")
    assert bench.out == "runs/b"
    assert bench.start(Options(3), tmp_path, RunnerOptions(quiet=True)) == "table"
    assert seen == [(tmp_path, ["done"] * 3, ["r0", "r1", "r2"], 3, True)]
    assert (tmp_path / "runs" / "r2" / "DONE.json").is_file()
    with pytest.raises(TypeError, match="takes Options"):
        bench.start(object(), tmp_path)


def _job(config: dict, run_dir: Path) -> int:
    return config["i"]
