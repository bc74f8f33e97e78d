"""The page files beside the code: HTML templates filled with escaped values, and the static files.

The templates hold no data: the page's scripts read ``api/locks`` (the same JSON a script reads) and
fill the page with ``textContent``. What a template is filled with (the CSRF token, whether releasing
is allowed, a link back) is escaped here, and the pages are sent with a Content-Security-Policy that
runs only the page's own scripts.
"""

from __future__ import annotations

import html
from functools import lru_cache
from importlib import resources
from string import Template
from typing import Dict, Optional, Tuple

__all__ = ["page", "static", "STATIC_TYPES", "SECURITY_HEADERS", "PAGES"]

#: The pages by name: the list of locks, and one lock's own page.
PAGES = ("index", "lock")

STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}

#: Sent with every page: only the page's own files run and load; the page is framed by nobody.
SECURITY_HEADERS: Tuple[Tuple[str, str], ...] = (
    ("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
    ("Cache-Control", "no-store"),
)


@lru_cache(maxsize=None)
def _read(folder: str, name: str) -> str:
    return resources.files(__package__).joinpath(folder, name).read_text(encoding="utf-8")


def page(name: str, *, csrf: str, allow_release: bool, back: str = "", back_label: str = "",
         static_base: str = "static/") -> str:
    """The page ``name`` (:data:`PAGES`), every value it is filled with escaped."""
    values: Dict[str, str] = {"csrf": csrf, "release": "1" if allow_release else "0", "back": back,
                              "back_label": back_label, "static": static_base}
    return Template(_read("templates", f"{name}.html")).substitute(
        {key: html.escape(value, quote=True) for key, value in values.items()})


def static(name: str) -> Optional[Tuple[str, str]]:
    """A static file's text and content type; ``None`` for a name that is none of them."""
    suffix = name[name.rfind("."):] if "." in name else ""
    if "/" in name or "\\" in name or name.startswith(".") or suffix not in STATIC_TYPES:
        return None
    try:
        return _read("static", name), STATIC_TYPES[suffix]
    except (FileNotFoundError, IsADirectoryError):
        return None
