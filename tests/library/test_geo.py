"""Longitude and latitude to local metres (onlinegp.geo) against the lengths of a degree on the WGS 84 ellipsoid."""

import numpy as np
import pytest

pytest.importorskip("pyproj")

from onlinegp.geo import LocalFrame  # noqa: E402


def test_a_frame_is_metres_east_and_north_of_its_first_position():
    frame = LocalFrame.around(-122.5, 47.5)  # Puget Sound: UTM zone 10 north
    assert frame.crs == "EPSG:32610"
    lon = np.array([-122.5, -122.5, -122.499])
    lat = np.array([47.5, 47.501, 47.5])
    local = frame.to_local(lon, lat)
    np.testing.assert_allclose(local[0], 0.0, atol=0.5)  # the origin is the first position, to the metre
    # a thousandth of a degree: 111.2 m of latitude, 111.3 cos(47.5°) = 75.2 m of longitude (WGS 84), within the
    # zone's scale factor and the grid's convergence near the zone's centre meridian
    north, east = local[1] - local[0], local[2] - local[0]
    assert north[1] == pytest.approx(111.2, rel=2e-3) and abs(north[0]) < 1.5
    assert east[0] == pytest.approx(75.2, rel=2e-3) and abs(east[1]) < 1.5
    assert frame.to_dict() == {"crs": "EPSG:32610", "origin": list(frame.origin), "units": frame.to_dict()["units"]}


def test_the_southern_hemisphere_takes_its_own_zones():
    assert LocalFrame.around(151.2, -33.9).crs == "EPSG:32756"


def test_integers_scaled_degrees_are_refused_with_the_scale_to_give():
    with pytest.raises(ValueError, match="--coord-scale 1e-7"):
        LocalFrame.around(-1225000000.0, 475000000.0)
