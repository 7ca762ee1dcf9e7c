"""The lists that the bench commands read from their options: names ('a,b'), items ('1,2,4') and seeds ('0-9', '0,3,5',
'0-2,7')."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence


def parse_names(text: str | Sequence[str], what: str, known: Collection[str] | None = None) -> list[str]:
    """'a,b' (or a list) → ['a', 'b'] without duplicates; names are lower-cased. With ``known`` (the bundled
    environments), an item that is not a known name keeps its case: it is a file path."""
    items = text.split(",") if isinstance(text, str) else list(text)
    keep = lambda s: s if known is not None and s.lower() not in known else s.lower()  # noqa: E731
    names = list(dict.fromkeys(keep(s.strip()) for s in items if s.strip()))
    if not names:
        raise ValueError(f"give at least one {what} (comma-separated)")
    return names


def comma_items(text: str) -> list[str]:
    """'a,b' → ['a', 'b'], empty items dropped: a comma-separated option's items as its command hands them on."""
    return [x for x in text.split(",") if x]


def comma_ints(text: str) -> list[int]:
    """'1,2,4' → [1, 2, 4], as :func:`comma_items`."""
    return [int(x) for x in comma_items(text)]


def parse_seeds(text: str | Sequence[int]) -> list[int]:
    """'0-9', '0,3,5' or '0-2,7' (or a list of ints) → sorted unique seeds."""
    if not isinstance(text, str):
        return sorted({int(s) for s in text})
    seeds: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if m is None or (m.group(2) is not None and int(m.group(2)) < int(m.group(1))):
            raise ValueError(f"cannot read seeds {text!r}: use e.g. '0-9', '0,3,5' or '0-2,7'")
        seeds.update(range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1))
    if not seeds:
        raise ValueError("give at least one seed, e.g. --seeds 0-9")
    return sorted(seeds)
