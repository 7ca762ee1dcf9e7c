"""What the package says to its users (docstrings, help, messages) names no issue of our tracker: users do not know
our issues, so the text says what the thing does instead."""

import re
from pathlib import Path

import onlinegp

SRC = Path(onlinegp.__file__).parent
ISSUE = re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE)


def issue_mentions(src: Path = SRC) -> dict[str, list[str]]:
    """``path: [line: text, ...]`` for every Python file under ``src`` naming an issue (paths relative to ``src``)."""
    found = {}
    for path in sorted(src.rglob("*.py")):
        lines = [
            f"{n}: {line.strip()}" for n, line in enumerate(path.read_text().splitlines(), 1) if ISSUE.search(line)
        ]
        if lines:
            found[path.relative_to(src).as_posix()] = lines
    return found


def test_no_issue_numbers_in_the_package():
    assert issue_mentions() == {}


def test_issue_mentions_are_found(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.py").write_text('"""Fixed in Issue 12."""\nx = 1  # see issues #3\n')
    (tmp_path / "b.py").write_text('"""Two issues: the tissue 5 is no issue."""\n')
    assert issue_mentions(tmp_path) == {"sub/a.py": ['1: """Fixed in Issue 12."""', "2: x = 1  # see issues #3"]}
