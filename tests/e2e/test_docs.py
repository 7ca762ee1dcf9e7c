"""The API reference builds from the docstrings without a single warning (`mkdocs build --strict`, as `make docs`),
and the Python examples on its pages run."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "docs" / "index.md", *(ROOT / "docs").glob("api*.md")])


def test_mkdocs_build_strict_has_no_warnings(tmp_path):
    for module in ("mkdocs", "mkdocstrings_handlers.python", "material"):
        pytest.importorskip(module, reason="the docs extra is not installed (pip install '.[docs]')")
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml")]
        + ["--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=600,
    )
    log = done.stdout + done.stderr
    warnings = [line for line in log.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert done.returncode == 0 and not warnings, "mkdocs build --strict failed:\n" + log[-6000:]
    api = (site / "api.html").read_text()
    # the reference really comes from the docstrings: the base class, its update and the records are there
    for name in ("onlinegp.base.OnlineGP", "onlinegp.base.OnlineGP.update", "onlinegp.base.Prediction"):
        assert f'id="{name}"' in api, f"{name} is missing from the API page"
    models = (site / "api-models.html").read_text()
    assert 'id="onlinegp.models.poam.POAM"' in models and ":class:" not in models


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_docs_python_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for code in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S):
        exec(compile(code, str(page), "exec"), {"__name__": "docs"})


def test_every_page_is_in_the_nav_and_links_work_without_a_server():
    config = (ROOT / "mkdocs.yml").read_text()
    assert re.search(r"^use_directory_urls: false$", config, flags=re.M), "site/ opened from disk needs page.html links"
    nav = set(re.findall(r":\s*(\S+\.md)$", config, flags=re.M))
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages <= nav, f"pages missing from the nav in mkdocs.yml: {sorted(pages - nav)}"
