"""mkdocs hooks (``hooks:`` in mkdocs.yml).

* Pages name source files of the repository (``../tests/...``, ``../examples/...``) with
  relative links that work when browsing the repository; the site holds only ``docs/``, so
  those links become their plain link text here.
* ``docs/contributing.md`` and ``docs/changelog.md`` are stubs whose content is the
  repository's ``CONTRIBUTING.md`` and ``CHANGELOG.md``, read at build time, with their links
  into ``docs/`` made relative to the site.

* The docstrings use Sphinx roles (``:func:`load```); mkdocstrings renders them as the role's
  name before the code, which is dropped here.

Links between pages are left alone, so ``mkdocs build --strict`` still fails on a broken one.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INCLUDED = {"contributing.md": "CONTRIBUTING.md", "changelog.md": "CHANGELOG.md"}
PAGE_OF = {"README.md": "index.md", **{v: k for k, v in INCLUDED.items()}}

_OUTSIDE = re.compile(r"\[([^\]]+)\]\((\.\./[^)#\s]+)(#[^)\s]*)?\)")
_ROLE = re.compile(r":(?:func|class|meth|attr|data|mod|exc|obj):(?=<code>)")
_ROOT_LINK = re.compile(r"\[([^\]]+)\]\((?!https?:|#|mailto:)([^)#\s]+)(#[^)\s]*)?\)")


def _from_root(markdown: str) -> str:
    """Links of a file at the repository root, as seen from ``docs/``: ``docs/x.md`` → ``x.md``,
    the root files the site includes → their pages, anything else → its link text."""

    def link(m: re.Match) -> str:
        text, target, anchor = m.group(1), m.group(2), m.group(3) or ""
        if target.startswith("docs/"):
            return f"[{text}]({target[len('docs/') :]}{anchor})"
        if target in PAGE_OF:
            return f"[{text}]({PAGE_OF[target]}{anchor})"
        return text

    return _ROOT_LINK.sub(link, markdown)


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001 (mkdocs hook signature)
    source = INCLUDED.get(page.file.src_uri)
    if source is not None:
        return _from_root((ROOT / source).read_text())
    return _OUTSIDE.sub(lambda m: m.group(1), markdown)


def on_page_content(html, page, config, files):  # noqa: ARG001 (mkdocs hook signature)
    return _ROLE.sub("", html)
