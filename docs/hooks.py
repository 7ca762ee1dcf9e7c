"""mkdocs hook: turn the Sphinx roles of the docstrings (:class:`~onlinegp.base.OnlineGP`) into cross-references.

The docstrings follow the Google style that mkdocstrings renders, but cite other objects with Sphinx roles; the
rendered HTML shows those as ``:class:<code>...</code>``. This hook rewrites each into an optional autoref: a
link when the target is documented, plain code (the short name for ``~`` targets) otherwise.
"""

import re

ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|obj|exc):<code>(~?)([A-Za-z_][\w.]*)</code>")


def _autoref(match: re.Match) -> str:
    tilde, target = match.groups()
    title = target.rsplit(".", 1)[-1] if tilde else target
    return f'<autoref identifier="{target}" optional><code>{title}</code></autoref>'


def on_page_content(html: str, **kwargs) -> str:
    return ROLE.sub(_autoref, html)
