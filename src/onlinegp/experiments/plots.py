"""Figures: maps, uncertainty, length-scale maps, inducing inputs over paths, metric curves, animations.

Everything renders with matplotlib's Agg backend to files and closes its figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

#: readable names (with units) of metric columns, for panel titles and axis labels
METRIC_LABELS = {
    "smse": "SMSE",
    "msll": "MSLL",
    "rmse": "RMSE",
    "nlpd": "NLPD",
    "mae": "MAE",
    "update_time": "update time (s)",
    "update_cpu_time": "update CPU time (s)",
    "prediction_time": "prediction time (s)",
    "predict_time": "prediction time (s)",
    "plan_drive_time": "planning and driving time (s)",
    "wall_time": "wall time (s)",
    "num_inducing": "inducing points",
    "num_samples": "samples",
    "num_data": "training points",
    "epoch": "epoch",
}


def metric_label(key: str) -> str:
    """A metric column's readable name (:data:`METRIC_LABELS`), else the name with spaces for underscores."""
    return METRIC_LABELS.get(key, key.replace("_", " "))


def value_label(quantity: str, unit: str = "") -> str:
    """A colour-bar label such as ``elevation (m)``."""
    return f"{quantity} ({unit})" if unit else quantity


def _image(
    ax,
    values: np.ndarray,
    extent: Sequence[float],
    title: str,
    cmap: str = "terrain",
    vmin: float | None = None,
    vmax: float | None = None,
    colorbar: bool = True,
    label: str = "",
):
    im = ax.imshow(values, origin="lower", extent=extent, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label=label)
    return im


def plot_field(field: Any, path: str | Path, title: str | None = None, dpi: int = 100, small: bool = False) -> Path:
    """A :class:`~onlinegp.experiments.simulator.fields.Field` as an image, colour bar in its unit (``small``: a bare thumbnail)."""
    path = Path(path)
    fig, ax = plt.subplots(figsize=(2.4, 2.4) if small else (5, 4.2))
    if small:
        ax.imshow(field.values, origin="lower", extent=field.extent, cmap="terrain")
        ax.set_axis_off()
        ax.set_title(title or field.name, fontsize=9)
    else:
        _image(ax, field.values, field.extent, title or field.name, label=value_label("elevation", field.unit))
    return _finish(fig, path, None, dpi)


def plot_map(
    values: np.ndarray,
    extent: Sequence[float],
    path: str | Path,
    title: str,
    cmap: str = "terrain",
    vmin: float | None = None,
    vmax: float | None = None,
    points: np.ndarray | None = None,
    path_xy: np.ndarray | Sequence[np.ndarray] | None = None,
    dpi: int = 100,
    label: str = "",
    suptitle: str = "",
) -> Path:
    """One map (e.g. a predicted mean on a grid), optionally with a path and points on top; ``label`` names the
    colour bar (quantity and unit), ``suptitle`` the figure (e.g. model and environment). ``path_xy`` is one path
    (n, 2), or a list of them: one black path, or one coloured path per vehicle of a fleet."""
    path = Path(path)
    fig, ax = plt.subplots(figsize=(5, 4.4 if suptitle else 4.2))
    _image(ax, values, extent, title, cmap, vmin, vmax, label=label)
    paths = [] if path_xy is None else [path_xy] if isinstance(path_xy, np.ndarray) else list(path_xy)
    one = len(paths) == 1
    for k, xy in enumerate(paths):
        colour, name = ("k", "path") if one else (plt.cm.tab10(k % 10), f"vehicle {k}")
        if len(xy):
            ax.plot(
                xy[:, 0], xy[:, 1], "-", color=colour, lw=0.5 if one else 0.8, alpha=0.6 if one else 0.9, label=name
            )
    if points is not None and len(points):
        ax.plot(points[:, 0], points[:, 1], ".", color="tab:red", ms=2.5, label="inducing inputs")
    if path_xy is not None or points is not None:
        ax.legend(loc="upper right", fontsize=7, framealpha=0.7)
    ax.set_xlim(extent[0], extent[1])
    ax.set_ylim(extent[2], extent[3])
    return _finish(fig, path, suptitle, dpi)


def plot_metric_curves(
    rows: Sequence[dict],
    path: str | Path,
    keys: Sequence[str] = ("smse", "msll", "rmse", "nlpd", "update_time", "prediction_time"),
    x_key: str = "num_samples",
    dpi: int = 100,
    title: str = "",
) -> Path:
    """Metric curves against ``x_key``, one panel per key titled by :func:`metric_label`; ``title`` names the
    figure (e.g. model and environment or dataset)."""
    path = Path(path)
    keys = [k for k in keys if rows and k in rows[0]]
    cols = 3
    fig, axes = plt.subplots(
        (len(keys) + cols - 1) // cols, cols, figsize=(4 * cols, 3.2 * ((len(keys) + cols - 1) // cols)), squeeze=False
    )
    x = [r[x_key] for r in rows]
    for ax, k in zip(axes.flat, keys):
        ax.plot(x, [r[k] for r in rows], "-", lw=1.2)
        ax.set_title(metric_label(k))
        ax.set_xlabel(metric_label(x_key))
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(keys) :]:
        ax.set_axis_off()
    return _finish(fig, path, title, dpi)


def animate_maps(
    frames: Sequence[dict],
    truth: np.ndarray,
    extent: Sequence[float],
    path: str | Path,
    fps: int = 8,
    dpi: int = 70,
    unit: str = "",
    title: str = "",
) -> Path:
    """GIF of a map being built: per frame, ``mean`` and ``std`` grids, the ``path`` so far and a ``title`` (after
    the animation's ``title``); colour bars in ``unit``."""
    from matplotlib.animation import PillowWriter

    path = Path(path)
    fig, axes = plt.subplots(1, 3, figsize=(12, 4))
    vmin, vmax = float(truth.min()), float(truth.max())
    smax = max(float(np.max(f["std"])) for f in frames)
    elevation, std = value_label("elevation", unit), value_label("predictive std", unit)
    _image(axes[0], truth, extent, "ground truth", vmin=vmin, vmax=vmax, label=elevation)
    im_mean = _image(axes[1], frames[0]["mean"], extent, "predicted mean", vmin=vmin, vmax=vmax, label=elevation)
    im_std = _image(axes[2], frames[0]["std"], extent, "predictive std", cmap="viridis", vmin=0.0, vmax=smax, label=std)
    lines = [ax.plot([], [], "-", color="k", lw=0.6)[0] for ax in axes[1:]]
    heading = fig.suptitle(" ")
    fig.tight_layout()
    writer = PillowWriter(fps=fps)
    with writer.saving(fig, str(path), dpi):
        for f in frames:
            im_mean.set_data(f["mean"])
            im_std.set_data(f["std"])
            for line in lines:
                line.set_data(f["path"][:, 0], f["path"][:, 1])
            heading.set_text(": ".join(t for t in (title, f.get("title", "")) if t))
            writer.grab_frame()
    plt.close(fig)
    return path


def line_and_band(curve: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str]:
    """A sweep curve's x, line, band's low and high edges and the band's name: its own ``centre``, ``low``, ``high``
    and ``band`` where it gives them, else its mean ± std."""
    x = np.asarray(curve["samples"], dtype=np.float64)
    if "centre" in curve:
        centre, low, high = (np.asarray(curve[k], dtype=np.float64) for k in ("centre", "low", "high"))
        return x, centre, low, high, curve["band"]
    mean, std = (np.asarray(curve[k], dtype=np.float64) for k in ("mean", "std"))
    return x, mean, mean - std, mean + std, "mean ± std"


def plot_sweep_curves(
    panels: dict[tuple[str, str], dict[str, dict]],
    path: str | Path,
    title: str = "",
    dpi: int = 100,
    xlabel: str = "samples",
) -> Path:
    """Metric curves of a sweep (Chen et al. 2024, Figs. 5, 8, 9): ``panels[(metric, env)] = {method: curve}`` with
    ``curve = {"samples", "mean", "std"}`` arrays (``samples`` on the x axis, named ``xlabel``), a ±std band per line,
    or ``{"samples", "centre", "low", "high", "band"}`` (a line, its band and their name, e.g. a median and its
    quartiles); rows are metrics, columns environments, and each panel's y axis names its line and band."""
    path = Path(path)
    metrics = list(dict.fromkeys(k for k, _ in panels))
    envs = list(dict.fromkeys(e for _, e in panels))
    fig, axes = plt.subplots(
        len(metrics), len(envs), figsize=(3.6 * len(envs) + 1.6, 2.8 * len(metrics)), squeeze=False
    )
    methods = list(dict.fromkeys(m for lines in panels.values() for m in lines))
    colours = {m: plt.cm.tab10(i % 10) for i, m in enumerate(methods)}
    for i, metric in enumerate(metrics):
        for j, env in enumerate(envs):
            ax = axes[i, j]
            bands = set()
            for method, c in panels.get((metric, env), {}).items():
                x, centre, low, high, band = line_and_band(c)
                ax.plot(x, centre, "-", lw=1.3, color=colours[method], label=method)
                ax.fill_between(x, low, high, color=colours[method], alpha=0.2, lw=0)
                bands.add(band)
            ax.set_title(f"{metric_label(metric)} in {env}", fontsize=9)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("; ".join(sorted(bands)), fontsize=8)
            ax.grid(alpha=0.3)
    handles = [plt.Line2D([], [], color=colours[m], lw=2) for m in methods]
    fig.legend(handles, methods, loc="center right", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0, 1 - 1.4 / fig.get_figwidth(), 1))
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def plot_lengthscale_grid(
    truths: dict[str, tuple[np.ndarray, Sequence[float]]],
    maps: dict[tuple[str, str], tuple[np.ndarray, np.ndarray | None]],
    path: str | Path,
    dpi: int = 90,
) -> Path:
    """Chen et al. 2024, Fig. 7: a column per environment, the ground truth on top, then each method's learnt
    length-scale map (one colour scale per environment) with its inducing inputs as black dots.

    ``truths[env] = (grid values, extent)``; ``maps[(method, env)] = (length-scale grid, inducing inputs or None)``.
    """
    path = Path(path)
    envs = list(truths)
    methods = list(dict.fromkeys(m for m, _ in maps))
    fig, axes = plt.subplots(
        1 + len(methods), len(envs), figsize=(3.2 * len(envs), 2.9 * (1 + len(methods))), squeeze=False
    )
    for j, env in enumerate(envs):
        truth, extent = truths[env]
        _image(axes[0, j], truth, extent, env)
        ls = [maps[(m, env)][0] for m in methods if (m, env) in maps]
        lo, hi = (float(min(a.min() for a in ls)), float(max(a.max() for a in ls))) if ls else (None, None)
        for i, method in enumerate(methods, start=1):
            ax = axes[i, j]
            if (method, env) not in maps:
                ax.set_axis_off()
                continue
            values, Z = maps[(method, env)]
            _image(ax, values, extent, method, cmap="plasma", vmin=lo, vmax=hi, label="length-scale (m)")
            if Z is not None and len(Z):
                ax.plot(Z[:, 0], Z[:, 1], ".", color="k", ms=1.5)
            ax.set_xlim(extent[0], extent[1])
            ax.set_ylim(extent[2], extent[3])
    for ax in axes.flat:
        ax.title.set_fontsize(8)
    return _finish(fig, path, None, dpi)


def plot_toy_ensembles(panels: dict[str, dict[str, np.ndarray]], path: str | Path, dpi: int = 100) -> Path:
    """Kepler et al. 2021, Fig. 1: per ensemble, the 1-D training data and the predictive mean ± 2 std, coloured by the
    local model that predicts there (the most weighted one for weighted ensembles). ``panels[label]`` holds arrays
    ``x, mean, std, model, train_x, train_y`` and optionally ``num_models``."""
    path = Path(path)
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.8 * len(panels)), squeeze=False, sharex=True)
    for ax, (label, p) in zip(axes[:, 0], panels.items()):
        ax.plot(p["train_x"], p["train_y"], ".", color="0.6", ms=2, label="training data")
        models = np.unique(p["model"])
        for k, j in enumerate(models):
            c = plt.cm.tab10(k % 10)
            m = np.ma.masked_where(p["model"] != j, p["mean"])
            ax.plot(p["x"], m, "-", color=c, lw=1.6)
            ax.fill_between(
                p["x"],
                p["mean"] - 2 * p["std"],
                p["mean"] + 2 * p["std"],
                where=p["model"] == j,
                color=c,
                alpha=0.2,
                lw=0,
            )
        total = int(p["num_models"]) if "num_models" in p else len(models)
        ax.set_title(f"{label}: {total} model(s), {len(models)} of them predicting here (colours)", fontsize=9)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("x")
    return _finish(fig, path, None, dpi)


def plot_models_tradeoff(rows: Sequence[dict], path: str | Path, title: str = "", dpi: int = 100) -> Path:
    """Kepler et al. 2021, Fig. 2: RMSE and training rate (samples/s) against the number of local models, a line per
    method (rows hold ``method, num_models, rmse, rate``, e.g. one per threshold of a sweep)."""
    path = Path(path)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for i, method in enumerate(dict.fromkeys(r["method"] for r in rows)):
        pts = sorted((r["num_models"], r["rmse"], r["rate"]) for r in rows if r["method"] == method)
        n, err, rate = (np.array(v, dtype=np.float64) for v in zip(*pts))
        for ax, v in zip(axes, (err, rate)):
            ax.plot(n, v, "o-", color=plt.cm.tab10(i), label=method, ms=4)
    for ax, ylabel in zip(axes, ("RMSE", "training rate (samples/s)")):
        ax.set_xscale("log")
        ax.set_xlabel("number of models")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    return _finish(fig, path, title, dpi)


def plot_rmse_curves(
    rows: Sequence[dict], path: str | Path, labels: dict[str, str] | None = None, dpi: int = 100
) -> Path:
    """Kepler et al. 2021, Fig. 3: test RMSE as training batches arrive, a panel per dataset and a line per method
    (rows hold ``dataset, method`` and ``curve``, a list of ``{num_data, rmse}``)."""
    path = Path(path)
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    fig, axes = plt.subplots(1, len(datasets), figsize=(3.8 * len(datasets), 3.2), squeeze=False)
    methods = list(dict.fromkeys(r["method"] for r in rows))
    for ax, d in zip(axes[0], datasets):
        for r in rows:
            if r["dataset"] == d and r["curve"]:
                ax.plot(
                    [c["num_data"] for c in r["curve"]],
                    [c["rmse"] for c in r["curve"]],
                    "o-",
                    ms=3,
                    color=plt.cm.tab10(methods.index(r["method"])),
                    label=(labels or {}).get(r["method"], r["method"]),
                )
        ax.set_title(d, fontsize=9)
        ax.set_xlabel("training samples")
        ax.set_ylabel("RMSE")
        ax.set_yscale("log")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    return _finish(fig, path, None, dpi)


def plot_panel_curves(
    rows: Sequence[dict],
    path: str | Path,
    y_keys: Sequence[str],
    x_key: str = "num_data",
    panel_key: str = "dataset",
    line_key: str = "model",
    style_key: str | None = None,
    log_keys: Sequence[str] = (),
    title: str = "",
    dpi: int = 100,
) -> Path:
    """Curves of each ``y_key`` (a row of panels each) against ``x_key``: a column per ``panel_key`` value and a
    colour per ``line_key`` value; with ``style_key`` (e.g. the seed) a line style per its value too, so a model's
    runs share a colour. Rows are flat dicts (one point each). Keys in ``log_keys`` get a log axis."""
    path = Path(path)
    panels = list(dict.fromkeys(r[panel_key] for r in rows))
    lines = list(dict.fromkeys(r[line_key] for r in rows))
    styles = list(dict.fromkeys(r[style_key] for r in rows)) if style_key else [None]
    dashes = ("-", "--", ":", "-.")
    fig, axes = plt.subplots(len(y_keys), len(panels), figsize=(3.8 * len(panels), 2.9 * len(y_keys)), squeeze=False)
    for j, p in enumerate(panels):
        for i, k in enumerate(y_keys):
            ax = axes[i, j]
            for name in lines:
                labelled = False
                for s, style in enumerate(styles):
                    pts = [
                        (r[x_key], r[k])
                        for r in rows
                        if r[panel_key] == p
                        and r[line_key] == name
                        and (style_key is None or r[style_key] == style)
                        and r.get(k) is not None
                        and np.isfinite(r[k])
                    ]
                    if pts:
                        x, y = zip(*pts)
                        color = plt.cm.tab10(lines.index(name) % 10)
                        label = None if labelled else str(name)  # one legend entry per colour
                        ax.plot(x, y, dashes[s % len(dashes)], lw=1.2, color=color, label=label)
                        labelled = True
            if k in log_keys:
                ax.set_yscale("log")
            ax.set_title(f"{p}: {metric_label(k)}", fontsize=9)
            ax.set_xlabel(metric_label(x_key))
            ax.grid(alpha=0.3, which="both")
            ax.legend(fontsize=7)
    if style_key and len(styles) > 1:
        names = ", ".join(f"{dashes[s % len(dashes)]} {v}" for s, v in enumerate(styles))
        title = f"{title}\n{style_key}: {names}" if title else f"{style_key}: {names}"
    return _finish(fig, path, title, dpi)


def plot_uncertain_maps(
    frames: Sequence[dict], extent: Sequence[float], path: str | Path, cmap: str = "viridis", dpi: int = 100
) -> Path:
    """Predicted field maps with the marginal variance as opacity (Pescador-Barrios et al. 2024, Figs. 4, 7-9): one
    panel per frame holding ``mean`` and ``var`` grids, the ``path`` travelled so far (dotted), the latest batch ``new``
    and a ``title``. Opacity is 1 − var / max var over all frames; one colour scale for all panels."""
    path = Path(path)
    if not frames:
        raise ValueError("plot_uncertain_maps needs at least one frame")
    vmin = min(float(np.min(f["mean"])) for f in frames)
    vmax = max(float(np.max(f["mean"])) for f in frames)
    vtop = max(float(np.max(f["var"])) for f in frames) or 1.0
    fig, axes = plt.subplots(1, len(frames), figsize=(3.6 * len(frames) + 0.8, 3.6), squeeze=False)
    norm = matplotlib.colors.Normalize(vmin, vmax)
    for ax, f in zip(axes[0], frames):
        rgba = plt.get_cmap(cmap)(norm(f["mean"]))
        rgba[..., 3] = np.clip(1.0 - np.asarray(f["var"]) / vtop, 0.0, 1.0)
        ax.imshow(rgba, origin="lower", extent=extent, aspect="equal")
        if "path" in f:
            ax.plot(f["path"][:, 0], f["path"][:, 1], ":", color="0.3", lw=0.6)
        if "new" in f:
            ax.plot(f["new"][:, 0], f["new"][:, 1], "-", color="k", lw=0.8)
        ax.set_title(f.get("title", ""), fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=list(axes[0]), shrink=0.8, fraction=0.02, pad=0.01)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_lines(
    series: dict[str, tuple[Sequence[float], Sequence[float]]],
    path: str | Path,
    xlabel: str = "",
    ylabel: str = "",
    title: str = "",
    dpi: int = 100,
) -> Path:
    """One line per label from ``series[label] = (x, y)`` (e.g. model size per batch)."""
    path = Path(path)
    fig, ax = plt.subplots(figsize=(5, 3.4))
    for label, (x, y) in series.items():
        ax.plot(x, y, "o-", ms=3, lw=1.2, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _finish(fig, path, None, dpi)


def _finish(fig, path, title: str | None, dpi: int):
    """Title, tight layout, save and close a figure; returns ``path``."""
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
