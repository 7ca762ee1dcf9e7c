"""The page in a real browser: Playwright drives Debian's chromium (never Playwright's own download) against a
service running in this process; the page shows the new N and draws a map that is not blank. Skipped where chromium
or playwright is missing (`make test` installs chromium where apt-get can).

``ONLINEGP_PAGE_PNG=docs/live-mapping.png pytest tests/experiments/service/test_browser.py -k demo`` remakes the
README's picture of the page."""

import io
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from onlinegp.client import MapClient
from onlinegp.experiments.service.demo import demo_config, start_vehicles
from onlinegp.experiments.simulator.fields import bundled

from .helpers import rows, serving, small_config

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")

#: the least pixel variance (RGB in [0, 1]) of a screenshot that shows the map: the page before any data has about
#: 0.007 (text, empty canvases), with a map drawn about 0.12
MIN_VARIANCE = 0.03


def browser():
    """Chromium as Debian installs it, driven by Playwright; skips where either is missing."""
    executable = shutil.which("chromium")
    if executable is None:
        pytest.skip("no chromium on PATH (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install playwright)")
    return sync_playwright, executable


def variance(png: bytes) -> float:
    """The pixel variance of a PNG's RGB channels (values in [0, 1])."""
    import matplotlib.image

    return float(np.var(matplotlib.image.imread(io.BytesIO(png), format="png")[..., :3]))


def watch(url: str, until_n: int, post=None, screenshot: Path | None = None, timeout: float = 120.0):
    """Open the page at ``url``; once it is connected take a screenshot and call ``post()``; wait until it shows
    ``N = until_n`` (or more) and the map is drawn. The two screenshots' PNGs (the last also written to
    ``screenshot``)."""
    sync_playwright, executable = browser()
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            page = chromium.new_page(viewport={"width": 860, "height": 520})
            page.goto(url + "/")
            page.wait_for_function("document.getElementById('status').textContent.startsWith('N = ')")
            first = page.screenshot(full_page=True)
            if post is not None:
                post()
            shown = f"Number(document.getElementById('status').textContent.split(/\\s+/)[2]) >= {until_n}"
            page.wait_for_function(shown, timeout=timeout * 1000)
            page.wait_for_timeout(1500)  # the map the update announced: fetched and drawn
            return first, page.screenshot(path=screenshot, full_page=True)
        finally:
            chromium.close()


def test_the_page_shows_the_new_n_and_a_map(tmp_path):
    from onlinegp.experiments.service.app import create_app

    browser()
    app = create_app(tmp_path / "run", small_config(batch_seconds=0.2))
    token = app.state.service.state.store.add_token("boat")
    with serving(app) as url:
        client = MapClient(url, token)
        posts = [rows(seed) for seed in range(3)]

        def post():
            for batch in posts:
                client.post("boat", *np.array(batch).T)

        blank, shot = watch(url, 3 * len(posts[0]), post, tmp_path / "page.png")
        assert client.status()["N"] == 3 * len(posts[0])
    assert (tmp_path / "page.png").read_bytes() == shot
    assert variance(blank) < MIN_VARIANCE < variance(shot), (variance(blank), variance(shot))


@pytest.mark.slow
def test_the_demo_on_the_page(tmp_path):
    """``onlinegp serve demo`` as the README shows it: two vehicles on a bundled terrain, a few hundred rows."""
    from onlinegp.experiments.service.app import create_app

    browser()
    field = bundled("valley-ridges")
    app = create_app(tmp_path / "run", demo_config(field))
    tokens = {name: app.state.service.state.store.add_token(name) for name in ("vehicle1", "vehicle2")}
    png = Path(os.environ.get("ONLINEGP_PAGE_PNG", tmp_path / "page.png"))
    with serving(app) as url:
        stop = start_vehicles(url, tokens, field, app.state.service.state.config.area, speedup=50.0)
        try:
            _, shot = watch(url, 500, screenshot=png, timeout=300.0)
        finally:
            stop.set()
        assert set(MapClient(url).status()["vehicles"]) == set(tokens)
    assert variance(shot) > MIN_VARIANCE
