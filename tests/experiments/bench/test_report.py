"""``onlinegp bench report``: the results pages equal their rendering from the kept runs (onlinegp.experiments.bench.report)."""

import shutil

import pytest
from typer.testing import CliRunner

from onlinegp.experiments.bench.report import blocks, default_pages, render
from onlinegp.experiments.bench.runner import default_results_root
from onlinegp.experiments.cli import app, invoke

ROOT = default_results_root().parent
RESULTS = ROOT / "results"
PAGE = ROOT / "docs" / "results" / "vips.md"


def test_every_results_page_equals_its_rendering_from_the_kept_runs():
    """The CI check of the record: a table typed by hand, or kept runs changed under a page, fail here."""
    result = CliRunner().invoke(app, ["bench", "report", "--check"])
    assert result.exit_code == 0, result.output
    assert sum(len(blocks(p)) for p in default_pages(ROOT)) >= 1


def test_a_page_that_differs_is_reported_and_rewritten(tmp_path):
    page = tmp_path / "vips.md"
    shutil.copyfile(PAGE, page)
    block = blocks(page)[0]  # VIPS's Table 1; the page's other blocks are rendered too
    assert "0.33 (0.03)" in block.body
    page.write_text(page.read_text().replace(block.body, block.body.replace("0.33 (0.03)", "0.31 (0.03)", 1)))
    lines: list[str] = []
    assert render([page], RESULTS, invoke, check=True, echo=lines.append) == [page]
    assert lines[0].startswith("differs") and "0.31 (0.03)" in page.read_text()  # --check writes nothing
    assert all(line.startswith("ok") for line in lines[1:])
    assert render([page], RESULTS, invoke, echo=lines.append) == [page]
    assert page.read_text() == PAGE.read_text()
    assert render([page], RESULTS, invoke, check=True, echo=lines.append) == []


def test_a_block_whose_runs_are_not_kept_fails_and_names_them(tmp_path):
    page = tmp_path / "page.md"
    command = "onlinegp bench vips-table1 --datasets concrete --splits 7"  # split 5 and 6 were never run
    page.write_text(f"# t\n\n<!-- report: {command} | table.md | 0.1.0 -->\n| old |\n<!-- /report -->\n")
    with pytest.raises(ValueError, match="not kept for version 0.1.0 .* concrete/exact/split5"):
        render([page], RESULTS, invoke, echo=lambda line: None)
    page.write_text(f"<!-- report: {command} --out x | table.md | 0.1.0 -->\n<!-- /report -->\n")
    with pytest.raises(ValueError, match="no --out"):
        render([page], RESULTS, invoke, echo=lambda line: None)
