"""Ground-truth fields for the active-mapping simulator (POAM, Chen et al. 2024, §V-A).

A :class:`Field` is an elevation grid over a square environment (default 360×360 cells over [-31, 31]² m) with
values scaled to [0, 255], like the SRTM previews the paper used. Lookups are bilinear between cell centres and
vectorised. ``values[i, j]`` is the cell at ``x = xs[j]``, ``y = ys[i]`` (row 0 is the south edge).

Bundled environments are crops of the real elevation models shipped with matplotlib's sample data
(``jacksboro_fault_dem.npz``: a 3-arc-second DEM of the Jacksboro fault, Tennessee; ``topobathy.npz``: topography
and bathymetry around the Strait of Georgia), resampled with cubic splines. Users bring their own field as an
array, a .npy/.npz file or a GeoTIFF (needs the optional ``rasterio``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from scipy.interpolate import RectBivariateSpline

GRID_SIZE = 360
ENV_EXTENT = (-31.0, 31.0, -31.0, 31.0)
VALUE_RANGE = (0.0, 255.0)


@dataclass(frozen=True)
class Field:
    """A scalar field on a regular grid: ``values`` (ny, nx) over ``extent`` = (xmin, xmax, ymin, ymax)."""

    values: np.ndarray
    extent: tuple[float, float, float, float] = ENV_EXTENT
    name: str = "field"
    description: str = ""

    @property
    def cell_size(self) -> tuple[float, float]:
        ny, nx = self.values.shape
        xmin, xmax, ymin, ymax = self.extent
        return (xmax - xmin) / nx, (ymax - ymin) / ny

    def __call__(self, xy: Any, interpolation: str = "linear") -> np.ndarray:
        """Field values at points ``xy`` (..., 2), clamped at the border: bilinear interpolation between cell
        centres (``"linear"``) or the value of the cell the point lies in (``"nearest"``)."""
        xy = np.asarray(xy, dtype=np.float64)
        ny, nx = self.values.shape
        (hx, hy), (xmin, _, ymin, _) = self.cell_size, self.extent
        if interpolation == "nearest":
            j = np.clip(np.floor((xy[..., 0] - xmin) / hx).astype(np.int64), 0, nx - 1)
            i = np.clip(np.floor((xy[..., 1] - ymin) / hy).astype(np.int64), 0, ny - 1)
            return self.values[i, j].astype(np.float64)
        if interpolation != "linear":
            raise ValueError(f"interpolation must be 'linear' or 'nearest', got {interpolation!r}")
        u = np.clip((xy[..., 0] - xmin) / hx - 0.5, 0.0, nx - 1.0)
        v = np.clip((xy[..., 1] - ymin) / hy - 0.5, 0.0, ny - 1.0)
        j0 = np.minimum(u.astype(np.int64), nx - 2)
        i0 = np.minimum(v.astype(np.int64), ny - 2)
        fu, fv = u - j0, v - i0
        f = self.values
        return (1 - fv) * ((1 - fu) * f[i0, j0] + fu * f[i0, j0 + 1]) + fv * (
            (1 - fu) * f[i0 + 1, j0] + fu * f[i0 + 1, j0 + 1]
        )

    def grid(self, n: int, extent: tuple[float, float, float, float] | None = None) -> np.ndarray:
        """An ``n``×``n`` grid of points (n², 2) spanning ``extent`` (default: the field's), x fastest."""
        xmin, xmax, ymin, ymax = self.extent if extent is None else extent
        xx, yy = np.meshgrid(np.linspace(xmin, xmax, n), np.linspace(ymin, ymax, n))
        return np.column_stack([xx.ravel(), yy.ravel()])

    def digest(self) -> str:
        """A short hash of the values and extent, to check a resumed mission runs on the same field."""
        h = hashlib.sha256(np.ascontiguousarray(self.values, dtype=np.float64).tobytes())
        h.update(np.asarray(self.extent, dtype=np.float64).tobytes())
        return h.hexdigest()[:16]


def resample(array: np.ndarray, size: int = GRID_SIZE) -> np.ndarray:
    """Bicubic-spline interpolation of a 2-D array onto ``size``×``size`` cells covering the same area.

    The interpolating spline (exact for cubic surfaces) passes through the source cell centres; the outer half
    cell is held at the border spline value.
    """
    a = np.asarray(array, dtype=np.float64)
    ny, nx = a.shape
    rows = (np.arange(size) + 0.5) * ny / size - 0.5
    cols = (np.arange(size) + 0.5) * nx / size - 0.5
    spline = RectBivariateSpline(np.arange(ny), np.arange(nx), a, kx=min(3, ny - 1), ky=min(3, nx - 1), s=0)
    return spline(np.clip(rows, 0, ny - 1), np.clip(cols, 0, nx - 1))


def scale_values(array: np.ndarray, value_range: tuple[float, float] = VALUE_RANGE) -> np.ndarray:
    """Min-max scale to ``value_range`` ([0, 255] by default)."""
    lo, hi = float(array.min()), float(array.max())
    if not hi > lo:
        raise ValueError("the field is constant; a mapping task needs a field that varies")
    return value_range[0] + (array - lo) / (hi - lo) * (value_range[1] - value_range[0])


def from_array(
    array: Any,
    name: str = "custom",
    description: str = "",
    size: int = GRID_SIZE,
    extent: tuple[float, float, float, float] = ENV_EXTENT,
) -> Field:
    """Build a field from any 2-D array (row 0 = south edge): resampled to ``size``² cells, scaled to [0, 255]."""
    try:
        a = np.asarray(array, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"field {name!r} must be a numeric 2-D array, got {type(array).__name__}") from err
    a = np.squeeze(a)
    if a.ndim != 2:
        raise ValueError(f"field {name!r} must be a 2-D array (rows × columns), got shape {a.shape}")
    if min(a.shape) < 2:
        raise ValueError(f"field {name!r} needs at least 2×2 cells, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"field {name!r} has {int((~np.isfinite(a)).sum())} NaN/inf/no-data cells; fill them first")
    if a.max() == a.min():
        raise ValueError(f"field {name!r} is constant; a mapping task needs a field that varies")
    return Field(scale_values(resample(a, size)), tuple(float(e) for e in extent), name, description)


def load_file(path: str | Path, key: str | None = None) -> Field:
    """Load a field from ``.npy``, ``.npz`` (``key`` or the only/first 2-D array) or GeoTIFF (``.tif``/``.tiff``).

    Arrays are read with row 0 as the south edge; GeoTIFF rasters (north-up) are flipped accordingly.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"field file {str(path)!r} does not exist (give a bundled name, see --list-envs, or a file)")
    suffix = path.suffix.lower()
    if suffix not in (".npy", ".npz", ".tif", ".tiff"):
        raise ValueError(f"cannot read field file {str(path)!r}: use .npy, .npz, .tif or .tiff")
    try:
        if suffix == ".npy":
            array = np.load(path, allow_pickle=False)
        elif suffix == ".npz":
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        else:
            array = _read_geotiff(path)
    except ImportError as err:
        raise ValueError(str(err)) from err
    except Exception as err:  # corrupt, truncated or foreign files surface as many exception types
        raise ValueError(
            f"cannot read field file {str(path)!r} ({type(err).__name__}: {err}); "
            "give a NumPy .npy/.npz holding a 2-D array, or a GeoTIFF"
        ) from err
    if suffix == ".npz":
        names = [k for k, v in arrays.items() if v.ndim >= 2] if key is None else [key]
        if not names or names[0] not in arrays:
            raise ValueError(
                f"{str(path)!r} holds no 2-D array{'' if key is None else f' named {key!r}'}; it has {sorted(arrays)}"
            )
        array = arrays[names[0]]
    return from_array(array, name=path.stem, description=f"loaded from {path}")


def _read_geotiff(path: Path) -> np.ndarray:
    try:
        import rasterio
    except ImportError as err:
        raise ImportError(
            "reading GeoTIFF needs rasterio: pip install 'onlinegp[geotiff]' (or convert to .npy)"
        ) from err
    with rasterio.open(path) as src:
        band = src.read(1, masked=True)
    if np.ma.is_masked(band):
        band = np.ma.filled(band.astype(np.float64), np.nan)  # from_array then reports the no-data cells
    return np.asarray(band, dtype=np.float64)[::-1]


# ---------------------------------------------------------------------- bundled environments
@cache
def _sample_dem(name: str) -> np.ndarray:
    """matplotlib's sample elevation models, row 0 = south."""
    from matplotlib import cbook

    data = cbook.get_sample_data(name)
    if name == "jacksboro_fault_dem.npz":
        return np.asarray(data["elevation"], dtype=np.float64)[::-1]  # stored north-up
    return np.asarray(data["topo"], dtype=np.float64)  # latitude ascending: already south-up


def _crop(dem: str, rows: tuple[int, int], cols: tuple[int, int]) -> Callable[[], np.ndarray]:
    return lambda: _sample_dem(dem)[rows[0] : rows[1], cols[0] : cols[1]]


ENVIRONMENTS: dict[str, tuple[Callable[[], np.ndarray], str]] = {
    "valley-ridges": (
        _crop("jacksboro_fault_dem.npz", (0, 210), (170, 380)),
        "smooth lowland valley beside high dissected ridges across a fault: strongly non-stationary",
    ),
    "dissected-ridges": (
        _crop("jacksboro_fault_dem.npz", (0, 190), (0, 190)),
        "ridges and valleys everywhere: rugged, short length-scales throughout",
    ),
    "plateau": (
        _crop("jacksboro_fault_dem.npz", (190, 344), (180, 334)),
        "a gentle plateau with one rugged knob, an escarpment along the fault and a lowland corner",
    ),
    "coast": (
        _crop("topobathy.npz", (0, 60), (20, 80)),
        "coast: rugged mountains on land and smooth channels under the sea (topography + bathymetry)",
    ),
    "seafloor": (
        _crop("topobathy.npz", (0, 31), (0, 31)),
        "bathymetry only: a smooth continental shelf dropping into a steep slope",
    ),
}
DEFAULT_ENV = "valley-ridges"


def bundled(name: str) -> Field:
    """A bundled environment by name (see :data:`ENVIRONMENTS`)."""
    key = name.lower()
    if key not in ENVIRONMENTS:
        raise ValueError(
            f"unknown environment {name!r}; bundled: {', '.join(ENVIRONMENTS)} (or give a .npy/.npz/.tif path)"
        )
    return _bundled(key)


@cache
def _bundled(key: str) -> Field:
    make, description = ENVIRONMENTS[key]
    return from_array(make(), name=key, description=description)


def load_field(spec: str | Path | np.ndarray | Field) -> Field:
    """A bundled name, a file path, an array or a :class:`Field` → :class:`Field`."""
    if isinstance(spec, Field):
        return spec
    if isinstance(spec, np.ndarray):
        return from_array(spec)
    text = str(spec)
    if text.lower() in ENVIRONMENTS:
        return bundled(text)
    if Path(text).suffix.lower() in (".npy", ".npz", ".tif", ".tiff") or Path(text).exists():
        return load_file(text)
    raise ValueError(
        f"unknown environment {text!r}; bundled: {', '.join(ENVIRONMENTS)} (or give a .npy/.npz/.tif path)"
    )


def write_thumbnails(directory: str | Path, dpi: int = 60) -> list[Path]:
    """Render every bundled environment to ``directory/<name>.png`` (the README's thumbnails)."""
    from ..plots import plot_field

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in ENVIRONMENTS:
        paths.append(plot_field(bundled(name), directory / f"{name}.png", title=name, dpi=dpi, small=True))
    return paths
