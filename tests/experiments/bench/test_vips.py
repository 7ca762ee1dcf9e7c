"""`onlinegp stream`, `onlinegp bench vips-table1` and `vips-magnetic` end to end on tiny settings."""

import json

import pytest
from typer.testing import CliRunner

from onlinegp.experiments.cli import app

runner = CliRunner()


def test_stream_command_writes_a_run(tmp_path):
    out = tmp_path / "s"
    res = runner.invoke(
        app,
        [
            "stream",
            "--dataset",
            "synthetic2",
            "--model",
            "oips",
            "--out",
            str(out),
            "--quiet",
            "-o",
            "num_steps=5",
            "-o",
            'kernel_options={"lengthscale": 0.3}',
        ],
    )
    assert res.exit_code == 0, res.output
    rows = json.loads((out / "metrics.json").read_text())
    assert len(rows) == 10 and rows[-1]["num_data"] == 120  # synthetic2: its own ten batches
    assert json.loads((out / "config.json").read_text())["options"]["num_steps"] == 5
    bad = runner.invoke(app, ["stream", "--dataset", "nope", "--out", str(out), "--quiet"])
    assert bad.exit_code != 0 and "unknown dataset" in bad.output


def test_vips_table1_tiny(tmp_path):
    out = tmp_path / "t1"
    args = ["bench", "vips-table1", "--datasets", "concrete", "--methods", "exact,cv,oips,vips", "--splits", "2",
            "--max-size", "150", "--batches", "3", "--num-steps", "5", "--out", str(out), "--quiet"]  # fmt: skip
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    table = (out / "table.md").read_text()
    assert "| concrete |" in table and "VIPS M" in table and "Exact GP RMSE" in table
    summary = json.loads((out / "results.json").read_text())["concrete"]
    assert set(summary) == {"exact", "cv", "oips", "vips"}
    assert all(summary[m]["splits"] == 2 for m in summary)
    assert summary["exact"]["last"]["num_inducing"][0] == 120
    assert (out / "curves.png").is_file() and (out / "table.csv").is_file()
    again = runner.invoke(app, args)
    assert again.exit_code == 0 and (out / "table.md").read_text() == table  # resumed: nothing rerun


@pytest.mark.slow
def test_vips_magnetic_tiny(tmp_path):
    out = tmp_path / "m"
    res = runner.invoke(
        app,
        ["bench", "vips-magnetic", "--thin", "80", "--batches", "4", "--num-steps", "5", "--out", str(out), "--quiet"],
    )
    assert res.exit_code == 0, res.output
    for f in (
        "paths-vips-maps.png",
        "trajectory3-vips-maps.png",
        "trajectory3-cv-maps.png",
        "trajectory3-sizes.png",
        "sizes.csv",
        "results.json",
    ):
        assert (out / f).is_file()
    results = json.loads((out / "results.json").read_text())
    assert len(results["paths"]) == 4 and len(results["trajectory3-vips"]) == 4
    sizes = [r["num_inducing"] for r in results["trajectory3-vips"]]
    assert sizes == sorted(sizes)  # old inducing inputs are kept


def test_table1_runs_without_the_library_prior_and_keeps_the_old_keys_with_it():
    """The paper's Table 1 has no length-scale prior: the models the default specs build have none (the library puts
    one on every stationary kernel above three inputs); ``lengthscale_prior=True`` gives the configs of the runs
    made before the option existed (no key)."""
    from onlinegp.experiments.bench.vips import Table1Options, table1_specs
    from onlinegp.models.registry import make_model

    paper = table1_specs(Table1Options(datasets=("concrete",), methods=("vips",), splits=1))[0].config
    model = make_model("vips", 8, **paper["options"])
    assert paper["options"]["kernel_options"]["lengthscale_prior"] is None
    assert not list(model.kernel.named_priors())
    older = table1_specs(Table1Options(datasets=("concrete",), methods=("vips",), splits=1, lengthscale_prior=True))
    assert older[0].config["options"]["kernel_options"] == {"lengthscale": 1.0, "ard": False}
    assert [name for name, *_ in make_model("vips", 8, **older[0].config["options"]).kernel.named_priors()]


def test_chunked_split_streams_the_authors_folds(tmp_path):
    from onlinegp.experiments.stream import StreamConfig, prepare

    config = StreamConfig(dataset="concrete", model="oips", seed=2, split="chunked", batches=10)
    train, test, parts, _, _ = prepare(config)
    assert (
        len(parts) == 10 and len(train) + len(test) == 1030 and len(test) == 210
    )  # ten chunks of 103: fold 2 holds 21 of each
    assert config.to_json()["split"] == "chunked" and "split" not in StreamConfig(dataset="concrete").to_json()
    # a chunk's training rows lie below the next chunk's in the first input (standardised alike)
    assert max(train.X[parts[0], 0]) <= min(train.X[parts[1], 0])
    with pytest.raises(ValueError, match="split='chunked'"):
        prepare(StreamConfig(dataset="concrete", split="chunked", order="random"))
    res = runner.invoke(app, ["stream", "--dataset", "concrete", "--split", "nope", "--out", str(tmp_path / "s"), "-q"])
    assert res.exit_code == 2 and "split must be" in res.output


def test_row_index_streams_file_order_with_the_index_as_an_input():
    """``--row-index``: the authors' bike and elevators files begin each row with its index, which their loader reads
    as the first input; sorted by it, the training rows stream in file order, and the other inputs are ours."""
    import numpy as np

    from onlinegp.data import load_dataset
    from onlinegp.experiments.bench.vips import Table1Options, table1_specs
    from onlinegp.experiments.stream import StreamConfig, prepare

    plain, indexed = (
        table1_specs(Table1Options(datasets=("concrete",), methods=("oips",), splits=1, row_index=r))[0]
        for r in (False, True)
    )
    assert "row_index" not in plain.config["dataset_options"]  # the kept runs' keys are unchanged
    train, _, parts, _, _ = prepare(StreamConfig(**indexed.config))
    order = np.concatenate(parts)
    assert train.input_dim == 9 and np.all(np.diff(train.X[order, 0]) > 0)  # file order
    raw = load_dataset("concrete", row_index=True)
    assert np.array_equal(raw.X[:, 0], np.arange(1030)) and np.array_equal(raw.X[:, 1:], load_dataset("concrete").X)
    sorted_by_input = prepare(StreamConfig(**plain.config))[0]
    assert sorted_by_input.input_dim == 8


def test_given_order_streams_the_indexed_runs_rows_without_the_index():
    """``--order given`` separates the two parts of the authors' file protocol: the same training rows in the same
    (file) order as ``--row-index``, without the index as an input; a bad order is refused before anything runs."""
    import numpy as np

    from onlinegp.experiments.bench.vips import Table1Options, table1_specs
    from onlinegp.experiments.stream import StreamConfig, prepare

    def stream(**kw):
        spec = table1_specs(Table1Options(datasets=("concrete",), methods=("oips",), splits=1, **kw))[0]
        train, _, parts, _, _ = prepare(StreamConfig(**spec.config))
        return train.X[np.concatenate(parts)]

    indexed, given = stream(row_index=True), stream(order="given")
    assert given.shape[1] == indexed.shape[1] - 1 and np.array_equal(given, indexed[:, 1:])
    assert not np.array_equal(given, stream())  # the paper's text: sorted by the first input
    with pytest.raises(ValueError, match="order must be"):
        table1_specs(Table1Options(datasets=("concrete",), order="nope"))
    with pytest.raises(ValueError, match="order must be"):
        table1_specs(Table1Options(datasets=("concrete",), order="given", split="chunked"))
