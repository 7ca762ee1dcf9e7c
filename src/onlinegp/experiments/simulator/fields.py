"""Ground-truth fields for the active-mapping simulator (POAM, Chen et al. 2024, §V-A).

A :class:`Field` is a grid of values (an elevation model) over a rectangle ``extent = (xmin, xmax, ymin, ymax)``
in metres. Axis convention, everywhere: ``values[i, j]`` is the cell at ``x = xs[j]``, ``y = ys[i]``: columns run
west to east (x), **row 0 is the south edge** (y = ymin). Lookups are bilinear between cell centres, vectorised.

Bundled environments are crops of the real elevation models shipped with matplotlib's sample data
(``jacksboro_fault_dem.npz``: a 3-arc-second DEM of the Jacksboro fault, Tennessee; ``topobathy.npz``: topography
and bathymetry around the Strait of Georgia) in the paper's *normalised* frame: resampled with cubic splines to
360×360 cells over [-31, 31]² m and min-max scaled to [0, 255], like the SRTM previews the paper used (its sensor
noise, std 1, is in those units). ``paper-env2`` and ``paper-env3`` are two of the paper's own Table I maps (SRTM
tiles N17E073 and N47W124, public domain, NASA/USGS LP DAAC; ``onlinegp/data/srtm``), read as its implementation
reads them: the 360×360 grid of [0, 255] values unchanged, row 0 at y = -31.

Users bring their own DEM as an array or a ``.npy``/``.npz``/``.csv`` file or a GeoTIFF (needs ``rasterio``), in
one of two frames (``extent``):

* ``"normalised"`` (default): the paper's frame. The grid is resampled to 360 cells along its longer side (square
  cells, aspect ratio kept), its longer side spans [-31, 31] m around the origin, and values are scaled to [0, 255].
* ``"native"`` or an explicit ``(xmin, xmax, ymin, ymax)``: the file's own frame. No resampling, values in the
  file's units; ``native`` takes the extent from a GeoTIFF's transform (a projected CRS in metres) or from
  ``cell_size`` (metres; the grid's south-west corner at the origin).

Arrays without georeferencing are read with row 0 as the south edge unless ``first_row="north"`` (rasters and
images are usually stored north-up); a GeoTIFF's transform gives its own orientation. No-data cells (NaN, ±inf, the
GeoTIFF's no-data value or ``nodata``) are filled with the value of the nearest valid cell, with a
:class:`FieldWarning` giving their count.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from scipy.interpolate import RectBivariateSpline

from ..flags import option

GRID_SIZE = 360
#: fewest cells along each side of a user's grid: a smaller one is a plane or a single bump, nothing to survey
MIN_CELLS = 4
ENV_EXTENT = (-31.0, 31.0, -31.0, 31.0)
VALUE_RANGE = (0.0, 255.0)
SCALED_UNIT = "scaled 0-255"
SUFFIXES = (".npy", ".npz", ".csv", ".tif", ".tiff")
EXTENTS = ("normalised", "native")
FIRST_ROWS = ("south", "north")
VALUE_MODES = ("scaled", "native")
#: the axis convention, as the command line and error messages state it
AXES = "columns = x (west to east), rows = y with row 0 the south edge (--first-row north for north-up arrays)"


@dataclass(frozen=True)
class FieldOptions:
    """:func:`load_field`'s options for a DEM file or an array, as a mission's command takes them (``--extent`` ...
    ``--values``, text or numbers; :func:`load_file` reads them further) and gathers them into
    :attr:`~onlinegp.experiments.simulator.mission.MissionConfig.field_options`, by name in this order."""

    extent: str | None = option(
        None,
        "DEM file's frame: normalised (default: the paper's box, longer side over [-31, 31] m, aspect ratio kept, "
        "values scaled to 0-255), native (the file's own: a GeoTIFF's georeferencing, or --cell-size; values in its "
        "units) or XMIN,XMAX,YMIN,YMAX in metres",
    )
    cell_size: str | None = option(
        None, "with --extent native: metres per cell (or DX,DY); south-west corner at (0, 0)"
    )
    array: str | None = option(None, "which array of an .npz that holds several")
    first_row: str | None = option(None, "south (default: row 0 is y min) or north (north-up arrays, images)")
    nodata: float | None = option(
        None, "cell value meaning no data (NaN always does); filled from the nearest valid cell"
    )
    values: str | None = option(
        None, "scaled (to 0-255) or native (the file's units); default: scaled iff --extent normalised"
    )


class FieldWarning(UserWarning):
    """Something was done to a user's field that changes its values (no-data cells filled)."""


@dataclass(frozen=True)
class Field:
    """A scalar field on a regular grid: ``values`` (ny, nx), row 0 at ``ymin``, over ``extent`` = (xmin, xmax,
    ymin, ymax) in metres; ``unit`` names the values' unit (for figures)."""

    values: np.ndarray
    extent: tuple[float, float, float, float] = ENV_EXTENT
    name: str = "field"
    description: str = ""
    unit: str = ""

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


def resample(array: np.ndarray, size: int | tuple[int, int] = GRID_SIZE) -> np.ndarray:
    """Bicubic-spline interpolation of a 2-D array onto ``size`` (ny, nx) cells, or ``size``×``size``, covering
    the same area.

    The interpolating spline (exact for cubic surfaces) passes through the source cell centres; the outer half
    cell is held at the border spline value.
    """
    a = np.asarray(array, dtype=np.float64)
    ny, nx = a.shape
    out_y, out_x = (size, size) if np.isscalar(size) else size
    rows = (np.arange(out_y) + 0.5) * ny / out_y - 0.5
    cols = (np.arange(out_x) + 0.5) * nx / out_x - 0.5
    spline = RectBivariateSpline(np.arange(ny), np.arange(nx), a, kx=min(3, ny - 1), ky=min(3, nx - 1), s=0)
    return spline(np.clip(rows, 0, ny - 1), np.clip(cols, 0, nx - 1))


def scale_values(array: np.ndarray, value_range: tuple[float, float] = VALUE_RANGE) -> np.ndarray:
    """Min-max scale to ``value_range`` ([0, 255] by default)."""
    lo, hi = float(array.min()), float(array.max())
    if not hi > lo:
        raise ValueError("the field is constant; a mapping task needs a field that varies")
    return value_range[0] + (array - lo) / (hi - lo) * (value_range[1] - value_range[0])


def normalised_extent(shape: tuple[int, int]) -> tuple[float, float, float, float]:
    """The paper's box for a grid of ``shape`` (ny, nx): the longer side spans [-31, 31] m, aspect ratio kept."""
    ny, nx = shape
    hx, hy = ENV_EXTENT[1] * min(1.0, nx / ny), ENV_EXTENT[3] * min(1.0, ny / nx)
    return (-hx, hx, -hy, hy)


def fill_nodata(array: np.ndarray, name: str = "field", nodata: float | None = None) -> np.ndarray:
    """``array`` with its no-data cells (NaN, ±inf, ``nodata``) set to the value of the nearest valid cell
    (Euclidean distance in cells), warning (:class:`FieldWarning`) with their count."""
    missing = ~np.isfinite(array)
    if nodata is not None:
        missing |= array == nodata
    count = int(missing.sum())
    if count == 0:
        return array
    if count == array.size:
        raise ValueError(f"field {name!r} has no valid cell: every one is NaN/inf or the no-data value {nodata}")
    from scipy.ndimage import distance_transform_edt  # only for fields with holes: not imported at start-up

    nearest = distance_transform_edt(missing, return_distances=False, return_indices=True)
    warnings.warn(
        f"field {name!r}: filled {count} no-data cell(s) of {array.size} with the nearest valid cell's value",
        FieldWarning,
        stacklevel=2,
    )
    return array[tuple(nearest)]


def _as_extent(extent: Any) -> tuple[float, float, float, float]:
    """``extent`` as four floats (xmin, xmax, ymin, ymax) with min < max, else a ValueError saying so."""
    if isinstance(extent, str):
        try:
            extent = [float(v) for v in extent.split(",")]
        except ValueError:
            extent = None
    try:
        box = tuple(float(v) for v in extent)
    except (TypeError, ValueError):
        box = ()
    if len(box) != 4 or not np.isfinite(box).all() or not (box[1] > box[0] and box[3] > box[2]):
        raise ValueError(
            f"extent must be normalised, native or XMIN,XMAX,YMIN,YMAX in metres with min < max, got {extent!r}"
        )
    return box


def _cell_sizes(cell_size: Any) -> tuple[float, float]:
    """``cell_size`` (one number, or DX,DY) as positive (dx, dy) in metres."""
    items = cell_size.split(",") if isinstance(cell_size, str) else np.atleast_1d(cell_size).tolist()
    try:
        sizes = [float(v) for v in items]
    except (TypeError, ValueError):
        sizes = []
    if len(sizes) == 1:
        sizes *= 2
    if len(sizes) != 2 or not all(np.isfinite(s) and s > 0 for s in sizes):
        raise ValueError(f"cell size must be a positive number of metres, or DX,DY, got {cell_size!r}")
    return sizes[0], sizes[1]


def from_array(
    array: Any,
    name: str = "custom",
    description: str = "",
    *,
    extent: str | tuple[float, float, float, float] = "normalised",
    cell_size: float | tuple[float, float] | str | None = None,
    first_row: str = "south",
    nodata: float | None = None,
    values: str | None = None,
    unit: str = "m",
    size: int = GRID_SIZE,
) -> Field:
    """Build a field from a 2-D array (see the module docstring for ``extent``, ``first_row`` and no-data).

    ``values``: ``scaled`` (min-max to [0, 255]) or ``native`` (kept, in ``unit``); default: scaled in the
    normalised frame, native otherwise. ``size``: cells along the longer side in the normalised frame.
    """
    try:
        a = np.asarray(array, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"field {name!r} must be a numeric 2-D array, got {type(array).__name__}") from err
    a = np.squeeze(a)
    if a.ndim != 2:
        raise ValueError(f"field {name!r} must be a 2-D array (rows × columns: {AXES}), got shape {a.shape}")
    if min(a.shape) < MIN_CELLS:
        raise ValueError(
            f"field {name!r} is {a.shape[0]}×{a.shape[1]} cells, too small to survey: a field needs at least "
            f"{MIN_CELLS}×{MIN_CELLS} cells (a smaller grid is a plane or a single bump, with nothing to map)"
        )
    if first_row not in FIRST_ROWS:
        raise ValueError(f"first_row must be south (row 0 at y = ymin) or north (row 0 at y = ymax), got {first_row!r}")
    normalised = isinstance(extent, str) and extent == "normalised"
    values = values or ("scaled" if normalised else "native")
    if values not in VALUE_MODES:
        raise ValueError(f"values must be scaled (min-max to 0-255) or native (the file's units), got {values!r}")
    if cell_size is not None and not (isinstance(extent, str) and extent == "native"):
        raise ValueError("a cell size goes with extent native (the other extents set the cell size themselves)")
    a = fill_nodata(a[::-1] if first_row == "north" else a, name, nodata)
    if a.max() == a.min():
        raise ValueError(f"field {name!r} is constant; a mapping task needs a field that varies")
    ny, nx = a.shape
    if normalised:
        shape = (
            (size, size) if ny == nx else (size, round(size * nx / ny)) if nx < ny else (round(size * ny / nx), size)
        )
        a, box = resample(a, shape), normalised_extent((ny, nx))
        frame = f"resampled to {shape[0]}×{shape[1]} cells over the normalised box"
    elif isinstance(extent, str) and extent == "native":
        if cell_size is None:
            raise ValueError(
                f"field {name!r} has no georeferencing: extent native needs its cell size in metres "
                "(--cell-size 30, or DX,DY), or give the extent as XMIN,XMAX,YMIN,YMAX"
            )
        dx, dy = _cell_sizes(cell_size)
        box, frame = (0.0, nx * dx, 0.0, ny * dy), f"{dx:g}×{dy:g} m cells, south-west corner at (0, 0)"
    else:
        box, frame = _as_extent(extent), "its own grid over the given extent"
    if values == "scaled":
        a, unit = scale_values(a), SCALED_UNIT
    text = (
        f"{ny}×{nx} cells (row 0 = {first_row} edge), {frame}: x [{box[0]:g}, {box[1]:g}] m, "
        f"y [{box[2]:g}, {box[3]:g}] m; values {'min-max scaled to 0-255' if values == 'scaled' else f'kept ({unit})'}"
    )
    return Field(a, box, name, f"{description}: {text}" if description else text, unit)


def load_file(
    path: str | Path,
    *,
    array: str | None = None,
    extent: str | tuple[float, float, float, float] = "normalised",
    cell_size: float | tuple[float, float] | str | None = None,
    first_row: str | None = None,
    nodata: float | None = None,
    values: str | None = None,
) -> Field:
    """Load a field from ``.npy``, ``.npz`` (its only 2-D array, or ``array``), ``.csv`` (a grid of numbers, one
    raster row per line, no header; ``nan`` for missing cells) or GeoTIFF (``.tif``/``.tiff``, band 1).

    The other options are :func:`from_array`'s; a GeoTIFF's transform sets its orientation and, with
    ``extent="native"``, its extent (unless ``cell_size`` is given).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"field file {str(path)!r} does not exist (give a bundled name, see --list-envs, or a file)")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"cannot read field file {str(path)!r}: use {', '.join(SUFFIXES)}")
    if array is not None and suffix != ".npz":
        raise ValueError(f"--array picks one of the arrays in an .npz file; {path.name} holds a single grid")
    geotiff = suffix in (".tif", ".tiff")
    if geotiff and first_row is not None:
        raise ValueError(f"{path.name}: a GeoTIFF's transform gives its orientation; leave out first_row")
    try:
        if suffix == ".npy":
            grid = np.load(path, allow_pickle=False)
        elif suffix == ".npz":
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        elif suffix == ".csv":
            grid = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
        else:
            grid, geo_extent = _read_geotiff(path)
    except ImportError as err:
        raise ValueError(str(err)) from err
    except Exception as err:  # corrupt, truncated or foreign files surface as many exception types
        raise ValueError(
            f"cannot read field file {str(path)!r} ({type(err).__name__}: {err}); give a NumPy .npy/.npz holding "
            "a 2-D array, a .csv grid of numbers (comma-separated, no header, nan for missing cells) or a GeoTIFF"
        ) from err
    source = f"loaded from {path}"
    if suffix == ".npz":
        array, grid = _pick_array(path, arrays, array)
        source += f" (array {array!r})"
    if geotiff and extent == "native" and cell_size is None:
        if isinstance(geo_extent, str):
            raise ValueError(f"{path.name}: {geo_extent}")
        extent = geo_extent
        source += " (extent from its georeferencing)"
    return from_array(
        grid,
        name=path.stem,
        description=source,
        extent=extent,
        cell_size=cell_size,
        first_row=first_row or "south",
        nodata=nodata,
        values=values,
    )


def _pick_array(path: Path, arrays: dict[str, np.ndarray], name: str | None) -> tuple[str, np.ndarray]:
    """The array ``name`` of an .npz, or its only 2-D one; a ValueError listing the names otherwise."""
    if name is not None:
        if name not in arrays:
            raise ValueError(f"{path.name} has no array {name!r}; it holds {', '.join(sorted(arrays))}")
        return name, arrays[name]
    grids = [k for k, v in arrays.items() if np.squeeze(v).ndim == 2]
    if len(grids) == 1:
        return grids[0], arrays[grids[0]]
    if not grids:
        raise ValueError(f"{path.name} holds no 2-D array; it has {', '.join(sorted(arrays)) or 'none'}")
    shapes = ", ".join(f"{k} {arrays[k].shape}" for k in grids)
    raise ValueError(f"{path.name} holds several 2-D arrays ({shapes}): choose one with --array NAME")


def _read_geotiff(path: Path) -> tuple[np.ndarray, tuple[float, float, float, float] | str]:
    """Band 1 of a GeoTIFF with row 0 south (no-data cells as NaN), and its extent in metres from the transform,
    or the reason there is none."""
    try:
        import rasterio
    except ImportError as err:
        raise ImportError(
            "reading GeoTIFF needs rasterio: pip install 'onlinegp[geotiff]' (or convert to .npy)"
        ) from err
    with rasterio.open(path) as src:
        band = src.read(1, masked=True)
        t, crs = src.transform, src.crs
    band = np.ma.filled(np.ma.asarray(band, dtype=np.float64), np.nan)
    if t.b != 0 or t.d != 0:
        raise ValueError(f"{path.name} is a rotated raster; warp it north-up first (gdalwarp)")
    ny, nx = band.shape
    xs, ys = sorted((t.c, t.c + t.a * nx)), sorted((t.f, t.f + t.e * ny))
    if t.e < 0:  # north-up: row 0 is the north edge
        band = band[::-1]
    if crs is None:
        return band, "has no CRS, so its extent is not known in metres: give --cell-size or an explicit --extent"
    if crs.is_geographic or (crs.linear_units or "").lower() not in ("metre", "meter", "m"):
        return band, (
            f"its CRS is not in metres ({crs.to_string()}); reproject it (gdalwarp -t_srs EPSG:<UTM zone>), or give "
            "--cell-size or an explicit --extent"
        )
    return band, (xs[0], xs[1], ys[0], ys[1])


# ---------------------------------------------------------------------- bundled environments
@cache
def _sample_dem(name: str) -> np.ndarray:
    """matplotlib's sample elevation models, row 0 = south."""
    from matplotlib import cbook

    data = cbook.get_sample_data(name)
    if name == "jacksboro_fault_dem.npz":
        return np.asarray(data["elevation"], dtype=np.float64)[::-1]  # stored north-up
    return np.asarray(data["topo"], dtype=np.float64)  # latitude ascending: already south-up


def _crop(dem: str, rows: tuple[int, int], cols: tuple[int, int]) -> Callable[[], Field]:
    """A crop of a matplotlib sample DEM in the normalised frame (resampled to 360×360, scaled to [0, 255])."""
    return lambda: from_array(_sample_dem(dem)[rows[0] : rows[1], cols[0] : cols[1]])


def _paper_terrain(tile: str) -> Callable[[], Field]:
    """One of the POAM paper's own SRTM maps, loaded as its implementation reads it (Chen et al. 2024, Table I):
    the 360×360 grid of [0, 255] values as is (no resampling, no rescaling), row 0 at y = -31 on [-31, 31]²."""

    def make() -> Field:
        from importlib.resources import files

        with files("onlinegp.data").joinpath(f"srtm/{tile}.npz").open("rb") as f:
            values = np.load(f)["arr_0"].astype(np.float64)
        return from_array(values, extent=ENV_EXTENT, values="native", unit=SCALED_UNIT)

    return make


ENVIRONMENTS: dict[str, tuple[Callable[[], Field], str]] = {
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
    "paper-env2": (
        _paper_terrain("n17e073"),
        "the POAM paper's Env2 (SRTM N17E073, its own map): Table I's terrains, comparable cell by cell",
    ),
    "paper-env3": (
        _paper_terrain("n47w124"),
        "the POAM paper's Env3 (SRTM N47W124, its own map): Table I's terrains, comparable cell by cell",
    ),
}
DEFAULT_ENV = "valley-ridges"
#: the POAM paper's own terrains (its Env2 and Env3), where Table I can be held against the paper cell by cell
PAPER_ENVS = ("paper-env2", "paper-env3")
#: the crops of matplotlib's sample DEMs (the environments before the paper's own maps were bundled)
SAMPLE_ENVS = tuple(name for name in ENVIRONMENTS if name not in PAPER_ENVS)


def bundled(name: str) -> Field:
    """A bundled environment by name (see :data:`ENVIRONMENTS`)."""
    key = name.lower()
    if key not in ENVIRONMENTS:
        raise ValueError(
            f"unknown environment {name!r}; bundled: {', '.join(ENVIRONMENTS)} (or give a .npy/.npz/.csv/.tif path)"
        )
    return _bundled(key)


@cache
def _bundled(key: str) -> Field:
    make, description = ENVIRONMENTS[key]
    return replace(make(), name=key, description=description)


def load_field(spec: str | Path | np.ndarray | Field, **options: Any) -> Field:
    """A bundled name, a file path, an array or a :class:`Field` → :class:`Field`.

    ``options`` (files and arrays only) are :func:`load_file`'s, the fields of :class:`FieldOptions`: ``extent``,
    ``cell_size``, ``array``, ``first_row``, ``nodata``, ``values``."""
    options = {k: v for k, v in options.items() if v is not None}
    known = [f.name for f in fields(FieldOptions)]
    if unknown := sorted(set(options) - set(known)):
        raise ValueError(f"unknown field option(s) {', '.join(unknown)}; known: {', '.join(known)}")
    text = str(spec) if isinstance(spec, (str, Path)) else ""
    if isinstance(spec, Field) or text.lower() in ENVIRONMENTS:
        if options:
            names = ", ".join(f"{k} (--{k.replace('_', '-')})" for k in options)
            raise ValueError(
                f"{names} appl{'ies' if len(options) == 1 else 'y'} to DEM files and arrays; "
                f"{getattr(spec, 'name', text)} is fixed (bundled environments use the paper's normalised box)"
            )
        return spec if isinstance(spec, Field) else bundled(text)
    if isinstance(spec, np.ndarray):
        if "array" in options:
            raise ValueError("array picks one of the arrays in an .npz file; this is an array already")
        return from_array(spec, **options)
    if Path(text).suffix.lower() in SUFFIXES or Path(text).exists():
        return load_file(text, **options)
    raise ValueError(
        f"unknown environment {text!r}; bundled: {', '.join(ENVIRONMENTS)} (or give a {'/'.join(SUFFIXES)} path)"
    )
