"""The Python blocks of the README and of docs/, as the doc tests see them.

A block right after an ``<!-- excerpt: PATH -->`` line is an excerpt of that file of the suite
(a test module, a module a test imports, or the Django project the tests run): it must appear
there word for word, after dedent and without a first line that only names the file
(``# proj/urls.py``). Every other block is an example that ``tests/test_docs_examples.py`` runs.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Iterator, List, NamedTuple, Optional

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_BLOCK = re.compile(r"^(?:<!-- excerpt: (?P<path>\S+) -->\n)?(?P<indent>[ \t]*)```(?:python|py)\b[^\n]*\n(?P<body>.*?)^(?P=indent)```",
                    re.S | re.M)


class Block(NamedTuple):
    page: Path
    line: int
    source: str
    excerpt_of: Optional[str]

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT).as_posix()}:{self.line}"


def blocks(page: Path) -> Iterator[Block]:
    text = page.read_text(encoding="utf-8")
    for match in _BLOCK.finditer(text):
        line = text.count("\n", 0, match.start("indent")) + 1
        yield Block(page, line, textwrap.dedent(match.group("body")), match.group("path"))


def excerpt_text(block: Block) -> str:
    """The block as it must appear in its file: a first comment line naming the file is dropped."""
    lines: List[str] = block.source.splitlines(keepends=True)
    assert block.excerpt_of is not None
    if lines and re.match(r"#\s*[\w/]+\.py\b", lines[0]) and block.excerpt_of.endswith(lines[0][1:].split()[0]):
        lines = lines[1:]
    return "".join(lines).strip("\n")
