import matplotlib

from onlinegp.experiments import plots


def test_panel_curves_give_a_model_one_colour_and_each_seed_a_line_style(tmp_path, monkeypatch):
    seen = {}

    def record(fig, path, title, dpi):
        ax = fig.axes[0]
        seen["lines"] = [(matplotlib.colors.to_hex(line.get_color()), line.get_linestyle()) for line in ax.lines]
        seen["legend"] = [t.get_text() for t in ax.get_legend().get_texts()]
        seen["title"] = title
        plots.plt.close(fig)
        return path

    monkeypatch.setattr(plots, "_finish", record)
    rows = [
        {"dataset": "d", "model": m, "seed": s, "num_data": n, "nll": float(n + s)}
        for m in ("wiski", "osgpr")
        for s in (0, 1)
        for n in (1, 2)
    ]
    plots.plot_panel_curves(rows, tmp_path / "p.png", ("nll",), style_key="seed", title="t")
    (c0, d0), (c1, d1), (c2, d2), (c3, d3) = seen["lines"]
    assert c0 == c1 != c2 == c3  # a colour per model
    assert d0 == d2 != d1 == d3  # a line style per seed
    assert seen["legend"] == ["wiski", "osgpr"]
    assert "seed" in seen["title"] and "t" in seen["title"]
    plots.plot_panel_curves(rows[:2], tmp_path / "p.png", ("nll",), style_key="seed", title="t")
    assert seen["title"] == "t"  # one seed: no key to the styles
    plots.plot_panel_curves(rows[2:], tmp_path / "p.png", ("nll",), style_key="seed", title="t")
    assert seen["legend"] == ["wiski", "osgpr"]  # a model without the first seed still has its entry


def test_sweep_curves_draw_each_curves_band_and_name_it_on_the_axis(tmp_path, monkeypatch):
    drawn, close = {}, plots.plt.close
    monkeypatch.setattr(plots.plt, "close", lambda fig: drawn.setdefault("fig", fig))
    quartiles = {"samples": [1, 2], "centre": [1.0, 2.0], "low": [0.5, 1.5], "high": [3.0, 4.0], "band": "median, IQR"}
    spread = {"samples": [1, 2], "mean": [1.0, 2.0], "std": [2.0, 2.0]}
    panels = {("update_time", "env"): {"a": quartiles}, ("smse", "env"): {"a": spread}}
    plots.plot_sweep_curves(panels, tmp_path / "c.png")
    time_axis, smse_axis = drawn["fig"].axes
    assert time_axis.get_ylabel() == "median, IQR" and smse_axis.get_ylabel() == "mean ± std"
    (band,) = time_axis.collections
    low, high = band.get_paths()[0].vertices[:, 1].min(), band.get_paths()[0].vertices[:, 1].max()
    assert (low, high) == (0.5, 4.0)
    assert smse_axis.collections[0].get_paths()[0].vertices[:, 1].min() == -1.0  # mean - std, as given
    close(drawn["fig"])
