"""Streaming datasets: bundled files, splits, orders, batches, synthetic streams."""

import gzip

import numpy as np
import pytest

from onlinegp.data import (
    UCI,
    Dataset,
    batch_indices,
    chunked_fold_split,
    list_datasets,
    load_dataset,
    order_indices,
    stream,
    synthetic,
    synthetic_function,
    train_test_split,
)

SHAPES = {
    "concrete": (1030, 8),
    "skillcraft": (3338, 19),
    "elevators": (16599, 18),
    "bike": (17379, 17),
    "kin40k": (40000, 8),
    "pumadyn32nm": (8192, 32),
    "protein": (45730, 9),
}


@pytest.mark.parametrize("name", ["concrete", "skillcraft", "pumadyn32nm"])
def test_uci_shapes_and_default_batches(name):
    ds = load_dataset(name)
    assert ds.X.shape == SHAPES[name] and ds.y.shape == (SHAPES[name][0],)
    assert ds.X.dtype == np.float64 and np.isfinite(ds.X).all() and np.isfinite(ds.y).all()
    assert ds.default_batches == (20 if len(ds) < 12000 else 50)


def test_all_bundled_sets_listed_and_uci_complete():
    assert set(SHAPES) == set(UCI) and set(UCI) <= set(list_datasets())


def test_bundled_uci_equal_to_shared_copy(shared_data):
    for name in ("concrete", "skillcraft"):
        with gzip.open(shared_data / "uci" / name / "data.csv.gz", "rt") as f:
            ref = np.loadtxt(f, delimiter=",")
        ds = load_dataset(name)
        np.testing.assert_array_equal(np.column_stack([ds.X, ds.y]), ref)


def test_magnetic_field_strength_is_norm(shared_data):
    ds = load_dataset("magnetic", trajectories=[2])
    mag = np.loadtxt(shared_data / "magnetic" / "invensense" / "2-mag.csv", delimiter=",")
    loc = np.loadtxt(shared_data / "magnetic" / "invensense" / "2-loc.csv", delimiter=",")
    np.testing.assert_allclose(ds.y, np.linalg.norm(mag, axis=1))
    np.testing.assert_array_equal(ds.X, loc)


def test_magnetic_streams_one_trajectory_per_batch():
    ds = load_dataset("magnetic", trajectories=[1, 2, 4, 5])
    parts = batch_indices(ds)
    assert [len(p) for p in parts] == [8875, 9105, 7332, 8313]
    assert [set(ds.groups[p]) for p in parts] == [{1}, {2}, {4}, {5}]
    assert np.all(np.diff(ds.time) > 0)
    three = list(stream(load_dataset("magnetic", trajectories=[3]), order="time", batches=20))
    assert len(three) == 20 and sum(len(y) for _, y in three) == 9404


def test_split_is_deterministic_disjoint_and_80_20():
    ds = load_dataset("concrete")
    tr1, te1 = train_test_split(ds, seed=3)
    tr2, te2 = train_test_split(ds, seed=3)
    tr3, _ = train_test_split(ds, seed=4)
    np.testing.assert_array_equal(tr1.X, tr2.X)
    np.testing.assert_array_equal(te1.y, te2.y)
    assert not np.array_equal(tr1.X, tr3.X)
    assert len(te1) == round(0.2 * len(ds)) and len(tr1) + len(te1) == len(ds)
    ids = Dataset(np.arange(50.0)[:, None], np.arange(50.0), "ids")
    tr, te = train_test_split(ids, seed=0)
    assert set(tr.y).isdisjoint(te.y) and len(set(tr.y) | set(te.y)) == 50
    assert np.all(np.diff(tr.y) > 0)  # original order kept


def test_chunked_folds_are_kfold_of_each_permuted_sorted_chunk():
    """The authors' code's split against a direct computation: sort, chunk, permute each chunk with one generator,
    hold out scikit-learn's KFold fold of it; over the folds every row is held out exactly once."""
    from sklearn.model_selection import KFold

    rng = np.random.default_rng(3)
    ds = Dataset(rng.normal(size=(103, 2)), rng.normal(size=103), "d")
    held = []
    for fold in range(5):
        train, test, batches = chunked_fold_split(ds, fold, folds=5, chunks=4, shuffle_seed=7)
        order, gen = np.argsort(ds.X[:, 0], kind="stable"), np.random.default_rng(7)
        chunks = [gen.permutation(order[c * 25 : (c + 1) * 25 if c < 3 else 103]) for c in range(4)]
        expected = [list(KFold(5).split(chunk))[fold] for chunk in chunks]
        np.testing.assert_array_equal(train.X, ds.X[np.concatenate([c[tr] for c, (tr, _) in zip(chunks, expected)])])
        np.testing.assert_array_equal(test.y, ds.y[np.concatenate([c[te] for c, (_, te) in zip(chunks, expected)])])
        assert [len(b) for b in batches] == [len(tr) for tr, _ in expected]
        np.testing.assert_array_equal(np.concatenate(batches), np.arange(len(train)))
        held.append(test.y)
    np.testing.assert_array_equal(np.sort(np.concatenate(held)), np.sort(ds.y))
    with pytest.raises(ValueError, match="fold must be"):
        chunked_fold_split(ds, 5)
    with pytest.raises(ValueError, match="chunks must be"):
        chunked_fold_split(ds, 0, chunks=30)


def test_orders_and_batches():
    rng = np.random.default_rng(0)
    ds = Dataset(rng.normal(size=(103, 3)), rng.normal(size=103), "t", time=rng.permutation(103).astype(float))
    srt = order_indices(ds, "sorted")
    assert np.all(np.diff(ds.X[srt, 0]) >= 0)
    assert np.all(np.diff(ds.time[order_indices(ds, "time")]) > 0)
    r1, r2 = order_indices(ds, "random", seed=1), order_indices(ds, "random", seed=1)
    np.testing.assert_array_equal(r1, r2)
    assert sorted(r1) == list(range(103))
    parts = batch_indices(ds, "sorted", 10)
    assert len(parts) == 10 and {len(p) for p in parts} == {10, 11}
    np.testing.assert_array_equal(np.concatenate(parts), srt)
    Xs = np.concatenate([X for X, _ in stream(ds, "sorted", 7)])
    np.testing.assert_array_equal(Xs, ds.X[srt])
    with pytest.raises(ValueError, match="order"):
        order_indices(ds, "backwards")
    with pytest.raises(ValueError, match="batches"):
        batch_indices(ds, "sorted", 0)
    with pytest.raises(ValueError, match="groups"):
        batch_indices(ds, "sorted", "groups")


def test_synthetic_datasets_follow_appendix_f1():
    d1, d2, d3 = (synthetic(k, seed=0) for k in (1, 2, 3))
    assert (len(d1), len(d2), len(d3)) == (500, 150, 1300)
    b1 = [d1.X[b, 0] for b in batch_indices(d1)]
    assert len(b1) == 10 and all(b1[i].max() <= b1[i + 1].min() for i in range(9))  # expanding domain
    b2 = [d2.X[b, 0] for b in batch_indices(d2)]
    assert len(b2) == 10 and all(b.max() - b.min() > 5 for b in b2)  # spread over [0, 10]
    b3 = [d3.X[b, 0] for b in batch_indices(d3)]
    assert all(((b >= 4) & (b <= 6)).all() for b in b3[:5])  # outliers only later
    assert sum(((b < 4) | (b > 6)).sum() for b in b3[5:]) > 100
    noise = d1.y - synthetic_function(d1.X[:, 0])
    assert 0.2 < noise.std() < 0.4
    np.testing.assert_array_equal(synthetic(2, seed=5).X, synthetic(2, seed=5).X)
    assert not np.array_equal(synthetic(2, seed=5).X, d2.X)


def test_toy_sets_and_errors(tmp_path):
    toy = load_dataset("toy")
    assert toy.X.shape[1] == 1 and len(toy) == len(toy.y)
    bt = load_dataset("banana", split="test")
    assert bt.X.shape[1] == 2 and set(np.unique(bt.y)) == {0.0, 1.0}
    with pytest.raises(ValueError, match="unknown dataset"):
        load_dataset("kin8nm")
    path = tmp_path / "mine.csv"
    np.savetxt(path, np.arange(12.0).reshape(4, 3), delimiter=",")
    mine = load_dataset(str(path))
    assert mine.X.shape == (4, 2) and mine.y.tolist() == [2.0, 5.0, 8.0, 11.0]


def test_unknown_loader_option_is_a_value_error():
    with pytest.raises(ValueError, match="does not take the options"):
        load_dataset("concrete", trajectories=[1])
    assert len(load_dataset("magnetic", trajectories=[4])) == 7332
