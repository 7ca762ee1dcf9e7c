"""Ground-truth fields: bilinear lookup, resampling and scaling, bundled environments, loading user files."""

import numpy as np
import pytest
from scipy.interpolate import RegularGridInterpolator

from onlinegp.rig import fields
from onlinegp.rig.fields import ENVIRONMENTS, Field, bundled, from_array, load_field


def test_bilinear_matches_scipy_between_cell_centres():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(7, 9))
    f = Field(values, (-3.0, 6.0, 0.0, 7.0))  # 1 m cells: centres at x = -2.5..5.5, y = 0.5..6.5
    xs, ys = -2.5 + np.arange(9), 0.5 + np.arange(7)
    ref = RegularGridInterpolator((ys, xs), values, method="linear")
    pts = np.column_stack([rng.uniform(-2.5, 5.5, 500), rng.uniform(0.5, 6.5, 500)])
    np.testing.assert_allclose(f(pts), ref(pts[:, ::-1]), rtol=0, atol=1e-12)
    # at a cell centre the value itself; beyond the outer centres clamped to the border values
    assert f(np.array([xs[3], ys[2]])) == pytest.approx(values[2, 3])
    np.testing.assert_allclose(f(np.array([[-3.0, 0.0], [6.0, 7.0]])), [values[0, 0], values[-1, -1]])
    assert f(pts.reshape(20, 25, 2)).shape == (20, 25)


def test_rows_are_south_to_north():
    ramp = np.tile(np.arange(50.0)[:, None], (1, 40))  # grows with the row index
    f = from_array(ramp)
    assert f.values.shape == (360, 360)
    assert f(np.array([0.0, 20.0])) > f(np.array([0.0, -20.0]))


def test_from_array_resamples_and_scales_to_0_255():
    rng = np.random.default_rng(1)
    f = from_array(rng.normal(size=(40, 60)) * 100 + 7)
    assert f.values.shape == (360, 360)
    assert f.values.min() == pytest.approx(0.0) and f.values.max() == pytest.approx(255.0)
    assert f.extent == (-31.0, 31.0, -31.0, 31.0)
    # a linear ramp survives resampling as a linear ramp over the cell centres
    ramp = from_array(np.tile(np.arange(10.0), (10, 1)))
    row = ramp.values[180]
    np.testing.assert_allclose(np.diff(row)[20:-20], 255 / 9 * 10 / 360, rtol=1e-9)
    np.testing.assert_allclose(ramp.values, np.broadcast_to(ramp.values[:1], (360, 360)), atol=1e-9)  # constant along y


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.ones(10), "2-D"),
        (np.ones((1, 10)), "2-D|2×2"),
        (np.full((5, 5), 3.0), "constant"),
        (np.where(np.eye(5) > 0, np.nan, 1.0), "NaN"),
        ([["a", "b"], ["c", "d"]], "numeric"),
    ],
)
def test_from_array_rejects_malformed(bad, match):
    with pytest.raises(ValueError, match=match):
        from_array(bad)


def test_bundled_environments_are_distinct():
    assert len(ENVIRONMENTS) >= 4 and fields.DEFAULT_ENV in ENVIRONMENTS
    roughness = {}
    for name in ENVIRONMENTS:
        f = bundled(name)
        assert f.values.shape == (360, 360) and f.name == name and f.description
        assert f.values.min() == pytest.approx(0.0) and f.values.max() == pytest.approx(255.0)
        gy, gx = np.gradient(f.values)
        g = np.hypot(gx, gy)
        roughness[name] = (g.mean(), g.std() / g.mean())
    assert len({f"{a:.3f}" for a, _ in roughness.values()}) == len(ENVIRONMENTS)
    # the valley-ridges environment is the non-stationary one: a rugged half and a smooth half
    f = bundled("valley-ridges")
    g = np.hypot(*np.gradient(f.values))
    assert g[:, :120].mean() > 1.5 * g[:, -120:].mean()
    assert roughness["dissected-ridges"][0] > roughness["seafloor"][0]


def test_load_npy_npz_and_names(tmp_path):
    rng = np.random.default_rng(2)
    a = rng.normal(size=(30, 20))
    np.save(tmp_path / "f.npy", a)
    np.savez(tmp_path / "g.npz", meta=np.arange(3), elev=a)
    ref = from_array(a)
    for p in (tmp_path / "f.npy", tmp_path / "g.npz", str(tmp_path / "g.npz")):
        f = load_field(p)
        np.testing.assert_array_equal(f.values, ref.values)
    assert load_field("Valley-Ridges") is bundled("valley-ridges")
    assert load_field(ref) is ref


def test_bad_files_fail_with_clear_messages(tmp_path):
    (tmp_path / "text.npy").write_text("not an array")
    (tmp_path / "trunc.npz").write_bytes(b"PK\x03\x04garbage")
    np.savez(tmp_path / "vec.npz", v=np.arange(5.0))
    np.save(tmp_path / "nan.npy", np.full((4, 4), np.nan))
    (tmp_path / "f.csv").write_text("1,2\n3,4\n")
    cases = {
        "text.npy": "cannot read field file",
        "trunc.npz": "cannot read field file",
        "vec.npz": "no 2-D array",
        "nan.npy": "NaN",
        "f.csv": "use .npy",
        "missing.npy": "does not exist",
    }
    for name, match in cases.items():
        with pytest.raises(ValueError, match=match):
            load_field(tmp_path / name)
    with pytest.raises(ValueError, match="unknown environment"):
        load_field("no-such-env")


def test_geotiff_without_rasterio_says_what_to_install(tmp_path):
    pytest.importorskip("PIL")
    try:
        import rasterio  # noqa: F401

        pytest.skip("rasterio is installed")
    except ImportError:
        pass
    (tmp_path / "dem.tif").write_bytes(b"II*\x00")
    with pytest.raises(ValueError, match="rasterio"):
        load_field(tmp_path / "dem.tif")


def test_grid_and_digest():
    f = bundled("seafloor")
    g = f.grid(50, (-30, 30, -30, 30))
    assert g.shape == (2500, 2) and g.min() == -30 and g.max() == 30
    assert np.all(np.diff(g[:50, 0]) > 0) and np.all(g[:50, 1] == -30)  # x fastest
    assert f.digest() == bundled("seafloor").digest() != bundled("coast").digest()


def test_write_thumbnails(tmp_path):
    paths = fields.write_thumbnails(tmp_path)
    assert sorted(p.name for p in paths) == sorted(f"{n}.png" for n in ENVIRONMENTS)
    assert all(p.stat().st_size > 1000 for p in paths)
