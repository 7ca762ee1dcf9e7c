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
