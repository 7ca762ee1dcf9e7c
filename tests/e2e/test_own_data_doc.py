"""docs/own-data.md's Python examples run as written, in order, in an empty directory."""

import re
import warnings
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "own-data.md"


def test_own_data_examples_run(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 5, "docs/own-data.md lost its Python examples"
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "own_data_doc"}  # one namespace: later blocks continue earlier ones, as a reader would
    with warnings.catch_warnings():
        warnings.simplefilter("error", SyntaxWarning)
        for number, code in enumerate(blocks, start=1):
            exec(compile(code, f"{DOC.name} (python block {number})", "exec"), namespace)
    assert (tmp_path / "runs" / "my-dem" / "config.json").is_file()
    assert (tmp_path / "runs" / "replay-log" / "comparison.md").is_file()
