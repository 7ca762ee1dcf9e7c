"""GeoTIFF maps (onlinegp.maps): read back with rasterio, the CRS, the transform and every cell against predict at
the cell's centre, the centre computed by rasterio from the file's own transform."""

import numpy as np
import pytest
import torch

from onlinegp import make_model
from onlinegp.maps import Raster, write_geotiff
from onlinegp.testing import toy

rasterio = pytest.importorskip("rasterio")


def fitted():
    x, y = toy(200, seed=3)
    model = make_model("osgpr", num_inducing=20, num_steps=5, seed=0)
    model.update(x * 40, y)  # metres: a 80 x 80 m survey around its first position
    return model


@pytest.mark.parametrize("frame", [None, {"crs": "EPSG:32610", "origin": [550000.0, 5260000.0]}])
def test_a_map_reads_back_as_predictions_at_its_cell_centres(tmp_path, frame):
    model = fitted()
    path = write_geotiff(tmp_path / "map.tif", model, [-40.0, -30.0], [40.0, 30.0], cell_size=2.0, frame=frame)
    east, north = (0.0, 0.0) if frame is None else frame["origin"]
    with rasterio.open(path) as src:
        assert (src.width, src.height, src.count) == (40, 30, 2)
        assert (src.crs is None) if frame is None else (src.crs.to_epsg() == 32610)
        assert src.transform == rasterio.Affine(2.0, 0.0, -40.0 + east, 0.0, -2.0, 30.0 + north)  # north-up
        mean, std = src.read(1), src.read(2)
        rows, cols = np.meshgrid(np.arange(src.height), np.arange(src.width), indexing="ij")
        xs, ys = rasterio.transform.xy(src.transform, rows.ravel(), cols.ravel())  # cell centres, the file's CRS
    centres = np.column_stack([np.asarray(xs) - east, np.asarray(ys) - north])
    prediction = model.predict(torch.as_tensor(centres))
    np.testing.assert_allclose(mean.ravel(), prediction.mean.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(std.ravel(), prediction.var_f.sqrt().numpy(), rtol=1e-12, atol=1e-12)
    assert (std > 0).all() and not np.allclose(std.ravel(), prediction.std_y.numpy())  # the field's, not y's


def test_the_grid_covers_the_box_and_maps_need_two_inputs(tmp_path):
    raster = Raster.covering([0.0, 0.0], [10.0, 5.0])
    assert raster.width == 200 and raster.height == 100 and raster.cell_size == pytest.approx(0.05)
    assert raster.centres()[0] == pytest.approx([0.025, 4.975])  # the north-west cell first
    with pytest.raises(ValueError, match="west < east"):
        Raster.covering([1.0, 0.0], [0.0, 1.0])
    with pytest.raises(ValueError, match="two inputs"):
        write_geotiff(tmp_path / "m.tif", fitted(), [0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
