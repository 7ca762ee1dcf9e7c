"""The sweep runner (onlinegp.experiments.bench.runner): completion, resume, failures, process and Ray backends, the committed
results tree (kill tests: tests/e2e/test_runner_kill.py)."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import onlinegp
from onlinegp.experiments.bench.runner import (
    ERROR_FILE,
    MARKER,
    SPEC_FILE,
    SWEEP_FILE,
    RunnerOptions,
    RunSpec,
    default_results_root,
    is_finished,
    resolve_results,
    run_sweep,
)


def toy_job(config: dict, run_dir: Path) -> dict:
    """A picklable job: writes a per-epoch CSV, counts its calls, fails on request."""
    with open(run_dir / "calls.log", "a") as fh:
        fh.write("call\n")
    if config.get("fail"):
        raise ValueError(f"deliberate failure of {config['method']} seed {config['seed']}")
    scale = {"a": 1.0, "b": 2.0}[config["method"]]
    rows = [(k, scale * (config["seed"] + 1) / (k + 1)) for k in range(config["epochs"])]
    (run_dir / "metrics.csv").write_text("epoch,value\n" + "".join(f"{k},{v!r}\n" for k, v in rows))
    return {"final": rows[-1][1]}


def specs(fail: tuple[str, int] | None = None, epochs: int = 3) -> list[RunSpec]:
    return [
        RunSpec(f"{m}/seed-{s}", {"method": m, "seed": s, "epochs": epochs, "fail": (m, s) == fail})
        for m in ("a", "b")
        for s in (0, 1)
    ]


def calls(run_dir: Path) -> int:
    return len((run_dir / "calls.log").read_text().splitlines())


def test_sweep_completes_and_rerun_skips(tmp_path):
    result = run_sweep(specs(), toy_job, tmp_path, RunnerOptions(quiet=True))
    assert [r.status for r in result.runs] == ["done"] * 4 and result.ok
    assert [r.run_id for r in result.runs] == ["a/seed-0", "a/seed-1", "b/seed-0", "b/seed-1"]
    for r in result.runs:
        assert is_finished(r.run_dir) and (r.run_dir / "metrics.csv").is_file()
        assert r.value == {"final": {"a": 1.0, "b": 2.0}[r.run_id[0]] * (int(r.run_id[-1]) + 1) / 3}
        assert not list(r.run_dir.glob(".*tmp"))  # the atomic write left no temporary file behind
        assert json.loads((r.run_dir / MARKER).read_text())["code"].startswith(onlinegp.__version__)
    assert len(json.loads((tmp_path / SWEEP_FILE).read_text())["runs"]) == 4

    again = run_sweep(specs(), toy_job, tmp_path, RunnerOptions(quiet=True))
    assert [r.status for r in again.runs] == ["skipped"] * 4
    assert [r.value for r in again.runs] == [r.value for r in result.runs]
    assert all(calls(r.run_dir) == 1 for r in again.runs)


def test_interrupted_and_changed_runs_are_run_again(tmp_path):
    run_sweep(specs(), toy_job, tmp_path, RunnerOptions(quiet=True))
    (tmp_path / "a/seed-1" / MARKER).unlink()  # as if the sweep had been killed while this run was writing
    changed = specs()
    changed[3] = RunSpec("b/seed-1", {**changed[3].config, "epochs": 5})
    result = run_sweep(changed, toy_job, tmp_path, RunnerOptions(quiet=True))
    assert [r.status for r in result.runs] == ["skipped", "done", "skipped", "done"]
    assert calls(tmp_path / "a/seed-1") == 2 and calls(tmp_path / "b/seed-1") == 2
    assert len((tmp_path / "b/seed-1/metrics.csv").read_text().splitlines()) == 6


def test_failing_run_is_reported_and_others_complete(tmp_path):
    result = run_sweep(specs(fail=("a", 1)), toy_job, tmp_path, RunnerOptions(quiet=True))
    status = {r.run_id: r.status for r in result.runs}
    assert status == {"a/seed-0": "done", "a/seed-1": "failed", "b/seed-0": "done", "b/seed-1": "done"}
    [failed] = result.failed
    assert failed.error == "ValueError: deliberate failure of a seed 1"
    trace = (tmp_path / "a/seed-1" / ERROR_FILE).read_text()
    assert "Traceback" in trace and "toy_job" in trace
    assert not is_finished(tmp_path / "a/seed-1")

    fixed = run_sweep(specs(), toy_job, tmp_path, RunnerOptions(quiet=True))  # the failed run is retried
    assert [r.status for r in fixed.runs] == ["skipped", "done", "skipped", "skipped"]
    assert not (tmp_path / "a/seed-1" / ERROR_FILE).exists()


def read_values(root: Path) -> dict[str, str]:
    return {p.parent.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("metrics.csv"))}


def test_worker_processes_match_in_process(tmp_path):
    serial = run_sweep(specs(fail=("b", 0)), toy_job, tmp_path / "serial", RunnerOptions(quiet=True))
    pool = run_sweep(specs(fail=("b", 0)), toy_job, tmp_path / "pool", RunnerOptions(workers=2, quiet=True))
    assert [(r.run_id, r.status, r.value, r.error) for r in pool.runs] == [
        (r.run_id, r.status, r.value, r.error) for r in serial.runs
    ]
    assert read_values(tmp_path / "pool") == read_values(tmp_path / "serial")
    assert (tmp_path / "pool/b/seed-0" / ERROR_FILE).is_file()


@pytest.mark.parametrize(
    "bad, message",
    [
        ([RunSpec("x", {}), RunSpec("x", {})], "appears twice"),
        ([RunSpec("../x", {})], "relative path"),
        ([RunSpec("/x", {})], "relative path"),
        ([RunSpec("x", {"f": object()})], "JSON-serialisable"),
    ],
)
def test_bad_specs_are_rejected(tmp_path, bad, message):
    with pytest.raises(ValueError, match=message):
        run_sweep(bad, toy_job, tmp_path, RunnerOptions(quiet=True))


def test_bad_options_are_rejected():
    with pytest.raises(ValueError, match="backend"):
        RunnerOptions(backend="slurm")
    with pytest.raises(ValueError, match="workers"):
        RunnerOptions(workers=0)
    with pytest.raises(ValueError, match="--backend ray"):
        RunnerOptions(address="auto")


def test_ray_backend_matches_local(tmp_path):
    ray = pytest.importorskip("ray")
    # Ray workers cannot import this test module by name (pytest put the repository root on sys.path only here): ship it by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    local = run_sweep(specs(fail=("a", 0)), toy_job, tmp_path / "local", RunnerOptions(quiet=True))
    try:
        remote = run_sweep(
            specs(fail=("a", 0)), toy_job, tmp_path / "ray", RunnerOptions(workers=2, backend="ray", quiet=True)
        )
        assert not ray.is_initialized()  # the runner shut down the instance it started
    finally:
        ray.shutdown()
    assert [(r.run_id, r.status, r.value, r.error) for r in remote.runs] == [
        (r.run_id, r.status, r.value, r.error) for r in local.runs
    ]
    assert read_values(tmp_path / "ray") == read_values(tmp_path / "local")
    assert all(calls(tmp_path / "ray" / r.run_id) == 1 for r in remote.runs)
    assert "Traceback" in (tmp_path / "ray/a/seed-0" / ERROR_FILE).read_text()
    assert all(is_finished(tmp_path / "ray" / r.run_id) for r in remote.runs if r.status == "done")


def test_ray_without_a_cluster_is_a_clear_error(tmp_path, monkeypatch):
    ray = pytest.importorskip("ray")

    def no_cluster(*args, **kwargs):  # what ray.init(address="auto") raises when no cluster runs
        raise ConnectionError("Could not find any running Ray instance.")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", no_cluster)
    with pytest.raises(ValueError, match="ray start --head"):
        run_sweep(specs(), toy_job, tmp_path, RunnerOptions(backend="ray", address="auto", quiet=True))
    assert not any(is_finished(tmp_path / s.run_id) for s in specs())


def test_ray_backend_without_ray_installed_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` sees when the extra is not installed
    with pytest.raises(ValueError, match=r"pip install 'onlinegp\[ray\]'"):
        run_sweep(specs(), toy_job, tmp_path, RunnerOptions(backend="ray", quiet=True))


def kept(results: Path, spec: RunSpec) -> Path:
    return results / "toy" / spec.config_hash


def sweep_kept(specs_, root: Path, results: Path, **options):
    opts = RunnerOptions(quiet=True, results=results, **options)
    return run_sweep(specs_, toy_job, root, opts, title="toy", summary=("metrics.csv",))


def test_results_tree_keeps_small_summaries_that_a_fresh_root_restores(tmp_path):
    results = tmp_path / "results"
    first = sweep_kept(specs(), tmp_path / "out", results)
    assert first.results == results / "toy" and [r.status for r in first.runs] == ["done"] * 4
    for spec in specs():
        saved = kept(results, spec)
        assert sorted(p.name for p in saved.iterdir()) == [MARKER, "metrics.csv", SPEC_FILE]  # not calls.log
        assert json.loads((saved / SPEC_FILE).read_text()) == {
            "run_id": spec.run_id,
            "config_hash": spec.config_hash,
            "config": spec.config,
            "job": f"{__name__}:toy_job",  # tests.experiments.bench.test_runner
            "summary": ["metrics.csv"],
        }
        assert (saved / MARKER).read_text() == (tmp_path / "out" / spec.run_id / MARKER).read_text()

    clone = sweep_kept(specs(), tmp_path / "clone", results)  # a fresh checkout: the tree, an empty sweep root
    assert [r.status for r in clone.runs] == ["skipped"] * 4 and all(r.restored for r in clone.runs)
    assert [r.value for r in clone.runs] == [r.value for r in first.runs]
    assert read_values(tmp_path / "clone") == read_values(tmp_path / "out")
    assert not list((tmp_path / "clone").rglob("calls.log"))  # nothing ran
    assert not any(r.restored for r in sweep_kept(specs(), tmp_path / "clone", results).runs)  # finished there now

    changed = sweep_kept(specs(epochs=5), tmp_path / "clone", results)  # new configs: run, kept beside the old
    assert [r.status for r in changed.runs] == ["done"] * 4
    assert len(list((results / "toy").iterdir())) == 8


def test_runs_finished_earlier_are_kept_and_fresh_runs_replace_them(tmp_path):
    out, results = tmp_path / "out", tmp_path / "results"
    run_sweep(specs(), toy_job, out, RunnerOptions(quiet=True))  # no results tree
    later = sweep_kept(specs(), out, results)
    assert [r.status for r in later.runs] == ["skipped"] * 4 and not any(r.restored for r in later.runs)
    assert all(is_finished(kept(results, s), s) for s in specs())

    (kept(results, specs()[0]) / "metrics.csv").write_text("stale\n")
    fresh = sweep_kept(specs(), out, results, fresh=True)
    assert [r.status for r in fresh.runs] == ["done"] * 4
    assert all(calls(out / s.run_id) == 1 for s in specs())  # run directories were started over
    assert read_values(out) == {s.run_id: (kept(results, s) / "metrics.csv").read_text() for s in specs()}
    assert not [p for p in (results / "toy").iterdir() if p.name.startswith(".")]


def test_leftovers_of_killed_writers_are_removed(tmp_path):
    store = tmp_path / "results" / "toy"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = f".tmp-{os.getpid()}-live"  # a running process's summary in the making is left alone
    for name in (f".tmp-{dead.pid}-abc", f".old-{dead.pid}-0123", live):
        (store / name).mkdir(parents=True)
    sweep_kept(specs(), tmp_path / "out", tmp_path / "results")
    assert [p.name for p in store.iterdir() if p.name.startswith(".")] == [live]


def test_results_options(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="plain directory name"):
        run_sweep(specs(), toy_job, tmp_path, RunnerOptions(quiet=True, results=tmp_path / "r"), title="a/b")
    assert resolve_results(None, enabled=False) is None and resolve_results("x", enabled=False) is None
    assert resolve_results("x") == Path("x") and resolve_results(None) == default_results_root()
    monkeypatch.chdir(tmp_path)  # this checkout's results/, from anywhere
    assert default_results_root() == Path(__file__).resolve().parents[3] / "results"


def test_cli_on_a_fresh_clone_restores_every_kept_run(tmp_path):
    from typer.testing import CliRunner

    from onlinegp.experiments.cli import app

    args = ["bench", "poam-table1", "--envs", "seafloor", "--methods", "poam", "--seeds", "0", "--budget", "120",
            "--num-inducing", "20", "--num-steps", "1"]  # fmt: skip
    results = tmp_path / "results"
    first = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "a"), "--results", str(results), "--quiet"])
    assert first.exit_code == 0, first.output
    saved = sorted((results / "poam-table1").iterdir())
    assert len(saved) == 1
    for path in saved:
        assert sorted(p.name for p in path.iterdir()) == [
            MARKER,
            "config.json",
            "lengthscale.npz",
            "metrics.csv",
            SPEC_FILE,
        ]

    env = {"ONLINEGP_RESULTS": str(results), "COLUMNS": "300"}
    clone = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "b"), "--resume"], env=env)
    assert clone.exit_code == 0, clone.output
    assert "0 run now, 1 already finished (1 restored from" in clone.output
    assert (tmp_path / "b/summary.md").read_text() == (tmp_path / "a/summary.md").read_text()
    assert (tmp_path / "b/poam-table1-lengthscales.png").is_file()
    assert not list((tmp_path / "b").rglob("model.pt"))

    alone = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "c"), "--no-results"], env=env)
    assert alone.exit_code == 0 and "1 run now" in alone.output
    assert sorted((results / "poam-table1").iterdir()) == saved


def test_a_dirty_tree_runs_into_the_sweep_root_but_keeps_nothing(tmp_path, monkeypatch, capsys):
    """Runs of uncommitted code are never kept: nobody could check out the code that made them."""
    from onlinegp.experiments.bench import runner

    monkeypatch.setattr(runner, "is_dirty", lambda code: code.endswith("+dirty)"))
    monkeypatch.setattr(runner, "code_version", lambda: "0.2.0 (git abc1234+dirty)")
    results = tmp_path / "results"
    opts = RunnerOptions(results=results, quiet=False)
    sweep = run_sweep(specs(), toy_job, tmp_path / "out", opts, title="toy", summary=("metrics.csv",))
    assert [r.status for r in sweep.runs] == ["done"] * 4
    assert not (results / "toy").exists()
    assert "uncommitted changes" in capsys.readouterr().err
    monkeypatch.setattr(runner, "code_version", lambda: "0.2.0 (git abc1234)")  # committed: finished runs are kept
    again = sweep_kept(specs(), tmp_path / "out", results)
    assert [r.status for r in again.runs] == ["skipped"] * 4 and not (results / "toy").exists()  # made dirty
    assert runner.is_dirty("0.2.0 (git abc1234+dirty)") and not runner.is_dirty("0.2.0 (git abc1234)")


def test_the_key_holds_the_package_version(monkeypatch):
    """A run of another version is a different run: never served, resumed or replaced as if current."""
    import onlinegp

    spec = specs()[0]
    before = spec.config_hash
    monkeypatch.setattr(onlinegp, "__version__", "999.0")
    assert spec.config_hash != before


def test_the_key_tells_the_portable_mode_apart(monkeypatch):
    """A portable run is another run than the default one of the same config (its numbers differ): never served for
    it, and the default keys stay as they were."""
    from onlinegp import portable

    spec = specs()[0]
    default = spec.config_hash
    monkeypatch.setattr(portable, "active", lambda: True)
    assert spec.config_hash != default
    monkeypatch.undo()
    assert spec.config_hash == default


def test_verify_reruns_kept_runs_and_names_every_number_that_moved(tmp_path):
    from onlinegp.experiments.bench.verify import kept_runs, verify

    results = tmp_path / "results"
    sweep_kept(specs(), tmp_path / "out", results)
    lines: list[str] = []
    verdicts = verify(results, echo=lines.append)
    assert [v.status for v in verdicts] == ["reproduced"] * 4 and "verifying 4 kept run(s)" in lines[0]

    run = kept_runs(results)[0]
    metrics = (run.path / "metrics.csv").read_text().splitlines()
    epoch, value = metrics[2].split(",")
    metrics[2] = f"{epoch},{math.nextafter(float(value), math.inf)!r}"  # one number moved by one ulp
    (run.path / "metrics.csv").write_text("\n".join(metrics) + "\n")
    [verdict] = verify(results, [run.name], echo=lines.append)
    assert verdict.status == "differs" and verdict.differences == [
        f"metrics.csv[1].value: committed {metrics[2].split(',')[1]!r}, now {value!r}"
    ]
    marker = json.loads((run.path / MARKER).read_text())
    (run.path / MARKER).write_text(json.dumps(marker | {"machine": "0123456789ab"}))
    [verdict] = verify(results, [run.name], echo=lines.append)
    assert verdict.differences[0].startswith("made on another machine kind (0123456789ab")
    assert len(verify(results, sample=2, echo=lines.append)) == 2
    assert {v.run.spec["run_id"] for v in verify(results, ["a/seed-0"], echo=lines.append)} == {"a/seed-0"}
    with pytest.raises(ValueError, match="no kept run is named 'nope'"):
        verify(results, ["nope"], echo=lines.append)


def test_verify_judges_a_run_of_another_machine_kind_by_its_repeats_spread_and_names_the_mode(tmp_path):
    """A default-mode run made elsewhere is 'close' when its results moved less than the std over its seeds (here
    a's final values 1/3 and 2/3: std 0.236), else 'differs'; a portable run must reproduce exactly."""
    from onlinegp.experiments.bench.verify import kept_runs, verify

    results = tmp_path / "results"
    sweep_kept(specs(), tmp_path / "out", results)
    run = next(r for r in kept_runs(results) if r.spec["run_id"] == "a/seed-0")
    marker = json.loads((run.path / MARKER).read_text())
    assert marker["numerics"] == "default"

    def verdict(moved: float, **fields):
        (run.path / MARKER).write_text(json.dumps(marker | {"value": {"final": 1 / 3 + moved}} | fields))
        lines: list[str] = []
        [v] = verify(results, [run.name], echo=lines.append)
        return v, lines

    close, lines = verdict(0.05, machine="0123456789ab")
    assert close.status == "close" and "made on another machine kind (0123456789ab" in close.differences[0]
    assert "value.final: committed 0.383333, now 0.333333: moved 0.05, 0.25 x the std over 2 repeat(s)" in lines[3]
    assert verdict(0.5, machine="0123456789ab")[0].status == "differs"
    assert verdict(0.05)[0].status == "differs"  # same machine kind, same mode: exact expected
    portable_run, lines = verdict(0.05, machine="0123456789ab", numerics="portable")  # no portable repeat: no spread
    assert portable_run.status == "differs" and "default" in lines[0] and "over 1 repeat(s) (nan)" in lines[3]
    assert "`onlinegp --portable bench verify` reproduces it exactly" in portable_run.differences[0]


def test_verify_leaves_wall_clock_figures_out():
    from onlinegp.experiments.bench.verify import _compare

    out: list[str] = []
    _compare(
        {"rmse": 1.0, "update_time": 2.0, "median_update_s": 3.0, "rate": 4.0},
        {"rmse": 1.0, "update_time": 9.0, "median_update_s": 9.0, "rate": 9.0},
        "value",
        out,
    )
    assert out == []
    _compare({"rmse": 1.0, "curve": [{"nll": 1.0}]}, {"rmse": 1.0, "curve": [{"nll": 1.5}]}, "value", out)
    assert out == ["value.curve[0].nll: committed 1.0, now 1.5"]


def test_verify_notes_fields_only_the_new_run_writes_and_still_fails_on_changed_numbers():
    """A newly reported quantity is not a changed number: noted once per field; a field the kept run has and the
    new one lacks, or a changed value, is a difference."""
    from onlinegp.experiments.bench.verify import _compare, split_new_fields

    out: list[str] = []
    kept = [{"rmse": 1.0, "m": 5}, {"rmse": 2.0, "m": 6}]
    _compare(kept, [{**row, "held": 0} for row in kept], "metrics.csv", out)
    assert split_new_fields(out) == ([], ["metrics.csv.held"])
    out = []
    _compare(kept, [{"rmse": 1.0, "held": 0}, {"rmse": 2.5, "m": 6, "held": 0}], "metrics.csv", out)
    differences, added = split_new_fields(out)
    assert added == ["metrics.csv.held"]
    assert differences == ["metrics.csv[0].m: only in the committed run", "metrics.csv[1].rmse: committed 2.0, now 2.5"]


def test_kept_only_restores_runs_of_a_pinned_version_by_run_id_and_their_recorded_config(tmp_path, monkeypatch):
    """History is read back after configs gained keys: a kept run matches a spec with the same run id whose config
    holds every key (nested too) the kept run recorded; nothing runs, and a run not kept is named."""
    from onlinegp.experiments.bench import runner
    from onlinegp.experiments.bench.runner import NotKept

    results = tmp_path / "results"
    monkeypatch.setattr(onlinegp, "__version__", "0.1.0")
    monkeypatch.setattr(runner, "code_version", lambda: "0.1.0 (git abc1234)")
    old = [RunSpec(s.run_id, s.config | {"opts": {"x": 1}}) for s in specs()]
    sweep_kept(old, tmp_path / "out", results)
    monkeypatch.setattr(onlinegp, "__version__", "0.2.0")
    monkeypatch.setattr(runner, "code_version", lambda: "0.2.0 (git def5678)")
    new = [RunSpec(s.run_id, s.config | {"opts": {"x": 1, "added": 0}, "added": True}) for s in old]
    restored = sweep_kept(new, tmp_path / "history", results, kept_only="0.1.0")
    assert [r.status for r in restored.runs] == ["skipped"] * 4 and all(r.restored for r in restored.runs)
    assert read_values(tmp_path / "history") == read_values(tmp_path / "out")
    assert all(is_finished(tmp_path / "history" / s.run_id, s) for s in new)  # the bench reads them as its own
    exact = sweep_kept(old, tmp_path / "exact", results, kept_only="0.1.0")  # found by their keys of 0.1.0
    assert all(r.restored for r in exact.runs) and read_values(tmp_path / "exact") == read_values(tmp_path / "out")
    changed = [RunSpec(s.run_id, s.config | {"opts": {"x": 2}}) for s in new]
    with pytest.raises(NotKept, match="4 run"):
        sweep_kept(changed, tmp_path / "other", results, kept_only="0.1.0")
    assert not list((tmp_path / "history").rglob("calls.log"))  # nothing ran
