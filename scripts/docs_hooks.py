"""MkDocs hooks of the documentation site (``mkdocs.yml``).

A page of ``docs/`` may link to a file beside the site (``../README.md``, a module of the package):
the link names a real file in the repository, which ``tests/unit/test_doc_links.py`` checks, but
it is no page of the site, so the site links to the file on GitHub instead of reporting it missing.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

REPOSITORY = "https://github.com/celery-singleton-lock/celery-singleton-lock/blob/main/"
_OUTSIDE = re.compile(r"\]\((\.\./[^)\s#]*)(#[^)\s]*)?\)")


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """Each link from a page to a file outside ``docs/`` points at that file in the repository."""
    folder = posixpath.join("docs", posixpath.dirname(page.file.src_uri))

    def outside(match: "re.Match[str]") -> str:
        target = posixpath.normpath(posixpath.join(folder, match.group(1)))
        return f"]({REPOSITORY}{target}{match.group(2) or ''})"

    return _OUTSIDE.sub(outside, markdown)
