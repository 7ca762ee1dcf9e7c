"""Ground-truth fields: bilinear lookup, resampling and scaling, bundled environments, loading user files (axis
convention, aspect ratio, native and explicit extents, units, no-data cells, multi-array .npz, CSV, GeoTIFF)."""

import sys
import types
from pathlib import Path

import numpy as np
import pytest
from scipy.interpolate import RegularGridInterpolator

from onlinegp.experiments.simulator import fields
from onlinegp.experiments.simulator.fields import ENVIRONMENTS, Field, FieldWarning, bundled, from_array, load_field


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
    assert f.values.shape == (360, 288)
    assert f(np.array([0.0, 20.0])) > f(np.array([0.0, -20.0]))
    north_up = from_array(ramp, first_row="north")  # row 0 is the north edge: the ramp now grows southwards
    assert north_up(np.array([0.0, 20.0])) < north_up(np.array([0.0, -20.0]))
    np.testing.assert_allclose(north_up.values, f.values[::-1], atol=1e-9)


def test_from_array_resamples_and_scales_to_0_255():
    rng = np.random.default_rng(1)
    f = from_array(rng.normal(size=(60, 60)) * 100 + 7)
    assert f.values.shape == (360, 360) and f.unit == fields.SCALED_UNIT
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
        (np.full((5, 5), np.nan), "no valid cell"),
        ([["a", "b"], ["c", "d"]], "numeric"),
    ],
)
def test_from_array_rejects_malformed(bad, match):
    with pytest.raises(ValueError, match=match):
        from_array(bad)


@pytest.mark.parametrize("shape", [(2, 2), (3, 3), (3, 40)])
def test_a_grid_too_small_to_survey_is_refused_with_the_minimum(shape, tmp_path):
    """Issue 35, item 6: a 2×2 or 3×3 DEM ran a mission without a word."""
    np.save(tmp_path / "tiny.npy", _dem(*shape))
    with pytest.raises(ValueError, match=f"'tiny' is {shape[0]}×{shape[1]} cells, too small .* at least 4×4 cells"):
        load_field(tmp_path / "tiny.npy")
    assert load_field(_dem(4, 4)).values.shape == (360, 360)


def test_bundled_environments_are_distinct():
    assert len(ENVIRONMENTS) >= 4 and fields.DEFAULT_ENV in ENVIRONMENTS
    roughness = {}
    for name in ENVIRONMENTS:
        f = bundled(name)
        assert f.values.shape == (360, 360) and f.name == name and f.description
        assert f.values.min() >= 0.0 and f.values.max() == pytest.approx(255.0)
        if name in fields.SAMPLE_ENVS:  # min-max scaled; the paper's own maps are read unchanged
            assert f.values.min() == pytest.approx(0.0)
        gy, gx = np.gradient(f.values)
        g = np.hypot(gx, gy)
        roughness[name] = (g.mean(), g.std() / g.mean())
    assert len({f"{a:.3f}" for a, _ in roughness.values()}) == len(ENVIRONMENTS)
    # the valley-ridges environment is the non-stationary one: a rugged half and a smooth half
    f = bundled("valley-ridges")
    g = np.hypot(*np.gradient(f.values))
    assert g[:, :120].mean() > 1.5 * g[:, -120:].mean()
    assert roughness["dissected-ridges"][0] > roughness["seafloor"][0]


SHARED_SRTM = Path(__file__).resolve().parents[4] / "shared" / "data" / "srtm"


@pytest.mark.parametrize("name, tile", [("paper-env2", "n17e073"), ("paper-env3", "n47w124")])
def test_paper_terrains_read_as_the_papers_implementation(name, tile):
    """Chen et al. 2024's sensor reads arr[row, col] with col = floor((x + 31) / cell), row = floor((y + 31) / cell):
    the bundled map, read at the nearest cell, gives exactly that, on the extent [-31, 31]², values unscaled."""
    f = bundled(name)
    assert f.extent == (-31.0, 31.0, -31.0, 31.0) and f.unit == fields.SCALED_UNIT
    arr = f.values
    if (SHARED_SRTM / f"{tile}.npz").exists():  # the prepared map as shared with this project
        np.testing.assert_array_equal(arr, np.load(SHARED_SRTM / f"{tile}.npz")["arr_0"])
    xy = np.random.default_rng(0).uniform(-30.0, 30.0, size=(500, 2))
    cell = 62.0 / 360
    rows, cols = np.floor((xy[:, 1] + 31) / cell).astype(int), np.floor((xy[:, 0] + 31) / cell).astype(int)
    np.testing.assert_array_equal(f(xy, interpolation="nearest"), arr[rows, cols])
    assert not np.array_equal(arr, arr[::-1])  # orientation matters on this map


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
    (tmp_path / "header.csv").write_text("x,y\n3,4\n")
    (tmp_path / "f.txt").write_text("1,2\n3,4\n")
    cases = {
        "text.npy": "cannot read field file",
        "trunc.npz": "cannot read field file",
        "vec.npz": "no 2-D array",
        "nan.npy": "no valid cell",
        "header.csv": "no header",
        "f.txt": "use .npy",
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


def test_every_bundled_environment_renders_as_a_thumbnail(tmp_path):
    from onlinegp.experiments.plots import plot_field

    paths = [
        plot_field(bundled(name), tmp_path / f"{name}.png", title=name, dpi=60, small=True) for name in ENVIRONMENTS
    ]
    assert sorted(p.name for p in paths) == sorted(f"{n}.png" for n in ENVIRONMENTS)
    assert all(p.stat().st_size > 1000 for p in paths)


def _dem(ny=200, nx=300):
    y, x = np.mgrid[0:ny, 0:nx]
    return 100.0 + 40.0 * np.sin(x / 25.0) + 0.5 * y


def test_a_200_by_300_grid_keeps_its_aspect_ratio():
    f = from_array(_dem())
    assert f.values.shape == (240, 360)
    xmin, xmax, ymin, ymax = f.extent
    assert (xmin, xmax) == (-31.0, 31.0) and (ymax - ymin) / (xmax - xmin) == pytest.approx(200 / 300)
    hx, hy = f.cell_size
    assert hx == pytest.approx(hy, rel=1e-12)  # square cells
    tall = from_array(_dem().T)
    assert tall.values.shape == (360, 240) and tall.extent[2:] == (-31.0, 31.0)


def test_native_and_explicit_extents_keep_grid_and_units():
    dem = _dem()
    native = from_array(dem, extent="native", cell_size=30)
    assert native.extent == (0.0, 9000.0, 0.0, 6000.0) and native.unit == "m"
    np.testing.assert_array_equal(native.values, dem)  # no resampling, no rescaling
    assert native.cell_size == (30.0, 30.0)
    assert from_array(dem, extent="native", cell_size="30,10").extent == (0.0, 9000.0, 0.0, 2000.0)
    box = from_array(dem, extent="500,800,-100,100")
    assert box.extent == (500.0, 800.0, -100.0, 100.0) and box.values.max() == dem.max()
    scaled = from_array(dem, extent=(0, 3, 0, 2), values="scaled")
    assert scaled.values.max() == pytest.approx(255.0) and scaled.unit == fields.SCALED_UNIT
    assert from_array(dem, values="native").values.max() == pytest.approx(dem.max(), rel=1e-3)
    for kwargs, match in [
        ({"extent": "native"}, "no georeferencing.*--cell-size"),
        ({"cell_size": 30}, "extent native"),
        ({"extent": "native", "cell_size": -1}, "positive"),
        ({"extent": "1,0,0,1"}, "min < max"),
        ({"extent": "utm"}, "normalised, native or XMIN"),
        ({"values": "metres"}, "scaled.*native"),
        ({"first_row": "top"}, "south.*north"),
    ]:
        with pytest.raises(ValueError, match=match):
            from_array(dem, **kwargs)


def test_nodata_cells_take_the_nearest_valid_value_with_a_warning():
    dem = _dem(20, 30)
    holed = dem.copy()
    holed[5, 7] = np.nan
    holed[0, 0] = -9999.0
    with pytest.warns(FieldWarning, match="filled 2 no-data cell"):
        f = from_array(holed, extent="native", cell_size=1, nodata=-9999)
    assert f.values[5, 7] in {dem[4, 7], dem[6, 7], dem[5, 6], dem[5, 8]}
    assert f.values[0, 0] in {dem[1, 0], dem[0, 1]}
    mask = np.ones_like(dem, dtype=bool)
    mask[5, 7] = mask[0, 0] = False
    np.testing.assert_array_equal(f.values[mask], dem[mask])
    with pytest.warns(FieldWarning, match="filled 1 no-data"):  # without nodata=, -9999 is a value
        assert from_array(holed, extent="native", cell_size=1).values[0, 0] == -9999.0


def test_npz_with_several_arrays_needs_array(tmp_path):
    dem = _dem(20, 30)
    np.savez(tmp_path / "two.npz", elev=dem, slope=np.gradient(dem)[0], meta=np.arange(3))
    with pytest.raises(ValueError, match=r"several 2-D arrays \(elev \(20, 30\), slope \(20, 30\)\).*--array"):
        load_field(tmp_path / "two.npz")
    f = load_field(tmp_path / "two.npz", array="elev", extent="native", cell_size=1)
    np.testing.assert_array_equal(f.values, dem)
    assert "array 'elev'" in f.description
    with pytest.raises(ValueError, match="no array 'dem'; it holds elev, meta, slope"):
        load_field(tmp_path / "two.npz", array="dem")
    np.save(tmp_path / "one.npy", dem)
    with pytest.raises(ValueError, match="--array picks"):
        load_field(tmp_path / "one.npy", array="elev")


def test_csv_grid_and_options_on_bundled(tmp_path):
    dem = _dem(6, 8)
    np.savetxt(tmp_path / "dem.csv", dem, delimiter=",")
    f = load_field(tmp_path / "dem.csv", extent="native", cell_size=2, first_row="north")
    np.testing.assert_allclose(f.values, dem[::-1])
    assert f.extent == (0.0, 16.0, 0.0, 12.0) and "row 0 = north edge" in f.description
    with pytest.raises(ValueError, match=r"extent \(--extent\) applies to DEM files"):
        load_field("seafloor", extent="native")
    with pytest.raises(ValueError, match="unknown field option"):
        load_field(tmp_path / "dem.csv", resolution=3)


class _FakeCRS:
    def __init__(self, geographic: bool):
        self.is_geographic, self.linear_units = geographic, "unknown" if geographic else "metre"

    def to_string(self):
        return "EPSG:4326" if self.is_geographic else "EPSG:32617"


def _fake_rasterio(monkeypatch, band, crs, nodata_mask=None):
    """A stand-in for rasterio.open: a north-up raster with 30 m cells whose north-west corner is (500000, 4000000)."""

    class Source:
        transform = types.SimpleNamespace(a=30.0, b=0.0, c=500000.0, d=0.0, e=-30.0, f=4000000.0)

        def __init__(self, path):
            self.crs = crs

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def read(self, index, masked=False):
            return np.ma.masked_array(band, mask=nodata_mask if nodata_mask is not None else False)

    monkeypatch.setitem(sys.modules, "rasterio", types.SimpleNamespace(open=Source))


def test_geotiff_native_extent_from_its_transform(tmp_path, monkeypatch):
    north_up = _dem(20, 30)  # row 0 of the raster is the north edge
    mask = np.zeros_like(north_up, dtype=bool)
    mask[0, 0] = True
    _fake_rasterio(monkeypatch, north_up, _FakeCRS(geographic=False), mask)
    (tmp_path / "dem.tif").write_bytes(b"II*\x00")
    with pytest.warns(FieldWarning, match="filled 1 no-data"):
        f = load_field(tmp_path / "dem.tif", extent="native")
    assert f.extent == (500000.0, 500900.0, 3999400.0, 4000000.0)
    np.testing.assert_array_equal(f.values[:-1], north_up[::-1][:-1])  # flipped: row 0 is now the south edge
    assert f.values[-1, 0] in {north_up[1, 0], north_up[0, 1]}
    with pytest.warns(FieldWarning):
        assert load_field(tmp_path / "dem.tif", extent="native", cell_size=10).extent == (0.0, 300.0, 0.0, 200.0)
    with pytest.raises(ValueError, match="orientation"):
        load_field(tmp_path / "dem.tif", first_row="north")
    _fake_rasterio(monkeypatch, north_up, _FakeCRS(geographic=True))
    with pytest.raises(ValueError, match="not in metres.*EPSG:4326.*--cell-size"):
        load_field(tmp_path / "dem.tif", extent="native")
    np.testing.assert_allclose(load_field(tmp_path / "dem.tif").extent, (-31.0, 31.0, -31 * 20 / 30, 31 * 20 / 30))
