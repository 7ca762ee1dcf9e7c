"""The CSV reader's clock (onlinegp.tables): numbers in a time unit, or ISO 8601 times, always read as seconds."""

import numpy as np
import pytest

from onlinegp.tables import read_table


def _log(tmp_path, times):
    path = tmp_path / "log.csv"
    rows = [f"{t},{k},{2 * k},{k * k}" for k, t in enumerate(times)]
    path.write_text("time,east,north,depth\n" + "\n".join(rows) + "\n")
    return path


def test_iso_times_are_read_as_seconds_whatever_their_zone(tmp_path):
    times = ["2026-11-29T06:18:28.250Z", "2026-11-29T07:18:29.750+01:00", "2026-11-29 06:18:31"]
    table = read_table(_log(tmp_path, times), time="time", time_unit="ms")  # the unit is for numbers only
    np.testing.assert_allclose(table.key - table.key[0], [0.0, 1.5, 2.75], atol=1e-6)
    np.testing.assert_array_equal(table.y, [0.0, 1.0, 4.0])


def test_a_millisecond_clock_is_read_as_seconds(tmp_path):
    table = read_table(_log(tmp_path, [1000, 1250, 4000]), time="time", time_unit="ms")
    np.testing.assert_allclose(table.key, [1.0, 1.25, 4.0])


def test_a_clock_cell_that_is_neither_a_number_nor_a_time_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"line 3, column 'time': 'noon' is not a number or an ISO 8601 time"):
        read_table(_log(tmp_path, ["2026-11-29T06:18:28Z", "noon"]), time="time")
