"""Maps a GIS opens: a model's predictive mean and standard deviation on a raster, written as a GeoTIFF (rasterio).

The raster is north-up with square cells over a box of the model's inputs (metres east and north); each cell holds
the prediction at its centre. Band 1 is the predictive mean, band 2 the standard deviation of the field (the
latent f, without the sensor's noise). With a :class:`~onlinegp.geo.LocalFrame` (a log read with longitude and
latitude) the file is placed in that frame's CRS (its UTM zone's EPSG code, the origin added back); without one it
is in the inputs' own metres and carries no CRS. Needs rasterio (``pip install "onlinegp[geotiff]"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .base import OnlineGP

#: cells along the box's longer side when no cell size is given
DEFAULT_CELLS = 200


@dataclass(frozen=True)
class Raster:
    """A north-up grid: ``width`` x ``height`` square cells of ``cell_size`` whose top-left corner is (west, north)."""

    west: float
    north: float
    cell_size: float
    width: int
    height: int

    @classmethod
    def covering(cls, lower, upper, cell_size: float | None = None) -> Raster:
        """The grid of cells covering the box ``lower`` (west, south) to ``upper`` (east, north)."""
        (west, south), (east, north) = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
        if not (east > west and north > south):
            raise ValueError(f"a map's box needs west < east and south < north, got {lower} to {upper}")
        size = max(east - west, north - south) / DEFAULT_CELLS if cell_size is None else float(cell_size)
        if not size > 0:
            raise ValueError(f"a map's cell size must be positive, got {cell_size}")
        width, height = int(np.ceil((east - west) / size)), int(np.ceil((north - south) / size))
        return cls(float(west), float(north), size, width, height)

    def centres(self) -> np.ndarray:
        """(height * width, 2) cell centres, row by row from the north edge, west to east."""
        east = self.west + (np.arange(self.width) + 0.5) * self.cell_size
        north = self.north - (np.arange(self.height) + 0.5) * self.cell_size
        return np.stack(np.meshgrid(east, north), axis=-1).reshape(-1, 2)


def write_geotiff(
    path: str | Path,
    model: OnlineGP,
    lower,
    upper,
    cell_size: float | None = None,
    frame: dict | None = None,
) -> Path:
    """Write ``model``'s mean and field standard deviation over the box ``lower``-``upper`` of its inputs (metres)
    as a two-band float64 GeoTIFF at ``path``; ``frame`` (:meth:`onlinegp.geo.LocalFrame.to_dict`) places it on the
    Earth."""
    try:
        import rasterio
        from rasterio.transform import Affine
    except ImportError as err:
        raise ImportError('writing GeoTIFF needs rasterio: pip install "onlinegp[geotiff]"') from err
    if len(lower) != 2 or len(upper) != 2:
        raise ValueError(f"a map has two inputs (east, north); this box has {len(lower)}")
    raster = Raster.covering(lower, upper, cell_size)
    prediction = model.predict(torch.as_tensor(raster.centres(), dtype=torch.float64))
    bands = [prediction.mean, prediction.var_f.sqrt()]
    data = np.stack([b.detach().cpu().numpy().astype(np.float64).reshape(raster.height, raster.width) for b in bands])
    east, north = (0.0, 0.0) if frame is None else frame["origin"]
    profile = {
        "driver": "GTiff",
        "width": raster.width,
        "height": raster.height,
        "count": 2,
        "dtype": "float64",
        "crs": None if frame is None else frame["crs"],
        "transform": Affine(raster.cell_size, 0.0, raster.west + east, 0.0, -raster.cell_size, raster.north + north),
    }
    path = Path(path)
    with rasterio.open(path, "w", **profile) as out:
        out.write(data)
        out.set_band_description(1, "predictive mean")
        out.set_band_description(2, "standard deviation of the field (latent f)")
    return path
