"""mkdocs hooks (``hooks:`` in mkdocs.yml).

Pages name source files of the repository (``../tests/...``, ``../examples/...``) with
relative links that work on GitHub; the site holds only ``docs/``, so those links become the
plain link text here. Links between pages are left alone, so ``mkdocs build --strict`` still
fails on a broken one.
"""

from __future__ import annotations

import re

_OUTSIDE = re.compile(r"\[([^\]]+)\]\((\.\./[^)#\s]+)(#[^)\s]*)?\)")


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001 (mkdocs hook signature)
    return _OUTSIDE.sub(lambda m: m.group(1), markdown)
