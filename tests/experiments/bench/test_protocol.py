"""One way to register a bench: every ``onlinegp bench`` sweep command is a Bench of its module, with the common
options the Bench takes, and the runner's options reach its entry point as it takes them."""

import importlib
import inspect

import pytest
import typer

from onlinegp.experiments.bench.protocol import Bench, default_out
from onlinegp.experiments.bench.runner import RunnerOptions
from onlinegp.experiments.cli import BENCH_MODULES, app

MODULES = ("poam", "wgpr", "fleet", "defaults", "vips", "wiski")


def _params(name: str) -> dict:
    group = typer.main.get_command(app).commands["bench"]
    return {p.name: p for p in group.commands[name].params}


def test_every_bench_is_registered_once_from_its_module():
    found = {}
    for module in MODULES:
        for name, bench in importlib.import_module(f"onlinegp.experiments.bench.{module}").BENCHES.items():
            assert bench.name == name and name not in found
            found[name] = module
    assert found == BENCH_MODULES


@pytest.mark.parametrize("name", sorted(BENCH_MODULES))
def test_a_bench_command_takes_the_common_options_its_bench_takes(name):
    bench = importlib.import_module(f"onlinegp.experiments.bench.{BENCH_MODULES[name]}").BENCHES[name]
    params = _params(name)
    assert params["out"].default == bench.out == default_out(name) == f"runs/{name}"
    assert {"quiet", "force"} <= params.keys()
    assert {"results", "no_results", "resume"} <= params.keys() if bench.sweep else not params.keys() & {"results"}
    takes = set(inspect.signature(bench.run).parameters)
    assert "workers" not in params or bench.takes == "runner" or "workers" in takes
    assert ("backend" in params) == (bench.takes == "runner")
    own = params.keys() - {"out", "quiet", "force", "results", "no_results", "resume", "workers", "backend", "address"}
    assert own <= takes or "mission" in takes, f"{name}: options its entry point does not take: {own - takes}"


def test_start_hands_the_runner_over_as_the_entry_point_takes_it(tmp_path):
    calls = []

    def flat(out, size=1, quiet=False, results=None, fresh=False, log=print):
        calls.append(("flat", out, size, quiet, results, fresh))

    def flat_workers(out, workers=1, quiet=False, results=None, fresh=False, log=print):
        calls.append(("workers", workers))

    def runner(out, options=None, size=1):
        calls.append(("runner", options.workers, options.backend, size))

    def loop(out, quiet=False, log=print):
        calls.append(("loop", quiet))

    options = RunnerOptions(workers=3, quiet=True, results=tmp_path, fresh=True)
    Bench("a", flat).start("o", options, print, {"size": 2})
    Bench("b", flat_workers).start("o", options, print, {})
    Bench("c", runner, takes="runner").start("o", options, print, {"size": 4})
    Bench("d", loop, takes="loop").start("o", options, print, {})
    assert calls == [
        ("flat", "o", 2, True, tmp_path, True),
        ("workers", 3),
        ("runner", 3, "local", 4),
        ("loop", True),
    ]
    with pytest.raises(ValueError, match="runner, flat or loop"):
        Bench("e", flat, takes="nothing")
