"""The README's Python quick start runs as written."""

import re
from pathlib import Path

from onlinegp import MODELS

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_quick_start_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python example"
    monkeypatch.chdir(tmp_path)
    registered = dict(MODELS)
    try:
        for code in blocks:
            exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    finally:  # the README registers an example model: leave the registry as the other tests expect it
        MODELS.clear()
        MODELS.update(registered)
