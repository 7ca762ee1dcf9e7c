"""Longitude and latitude to metres: the local frame a vehicle's log is mapped in.

A degree of longitude and a degree of latitude are different lengths on the ground (their ratio is cos(latitude)),
so a model with one length-scale for both, or a map in degrees, is wrong. :class:`LocalFrame` projects with pyproj
to the UTM zone of the log's first position, and moves the origin to that position, so that inputs are metres east
and north of where the vehicle started; the frame (EPSG code and origin) is recorded with the run, so that a map
can be placed back on the Earth. Needs pyproj (``pip install "onlinegp[geo]"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class LocalFrame:
    """Metres east and north of ``origin`` (easting, northing) in the projected ``crs`` (e.g. ``"EPSG:32633"``)."""

    crs: str
    origin: tuple[float, float]

    @classmethod
    def around(cls, lon: float, lat: float) -> LocalFrame:
        """The frame of the WGS 84 UTM zone holding (lon, lat), with its origin at that point (to the metre)."""
        check_degrees(np.array([lon]), np.array([lat]))
        zone = int((lon + 180.0) // 6.0) % 60 + 1
        crs = f"EPSG:{(32600 if lat >= 0 else 32700) + zone}"
        easting, northing = _transformer(crs).transform(lon, lat)
        return cls(crs, (float(np.round(easting)), float(np.round(northing))))

    @cached_property
    def _forward(self):
        return _transformer(self.crs)

    def to_local(self, lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
        """(N, 2) metres east and north of the origin for longitudes and latitudes in degrees."""
        lon, lat = np.asarray(lon, np.float64), np.asarray(lat, np.float64)
        check_degrees(lon, lat)
        easting, northing = self._forward.transform(lon, lat)
        return np.column_stack([np.asarray(easting) - self.origin[0], np.asarray(northing) - self.origin[1]])

    def to_dict(self) -> dict:
        """The frame as a run records it."""
        return {"crs": self.crs, "origin": list(self.origin), "units": "metres east, north of the origin"}


def check_degrees(lon: np.ndarray, lat: np.ndarray) -> None:
    """A ValueError when these are not longitudes and latitudes in degrees (an integer-scaled log, say)."""
    if not (np.abs(lon) <= 180).all() or not (np.abs(lat) <= 90).all():
        worst = float(max(np.abs(lon).max(), np.abs(lat).max()))
        hint = f" (it is {worst:.4g}: degrees x 1e7, as ArduPilot logs them? pass --coord-scale 1e-7)"
        raise ValueError(f"longitudes must lie in [-180, 180] and latitudes in [-90, 90] degrees{hint}")


def _transformer(crs: str):
    try:
        from pyproj import Transformer
    except ImportError as err:
        raise ImportError('longitude/latitude inputs need pyproj: pip install "onlinegp[geo]"') from err
    return Transformer.from_crs("EPSG:4326", crs, always_xy=True)
