"""Lock URLs and client options fit to print: every secret they may hold shown as ``***``.

A URL is read here the way a careless hand may have typed it, not the way a
parser would: a password with an unencoded ``#``, ``?``, ``/``, ``@`` or ``;``
makes ``urlsplit`` cut the URL in the wrong places, and the pieces it then calls
the host, the port or the fragment are the password's. So everything between
``://`` and the last ``@`` is taken for credentials (the user name, up to the
first ``:``, is kept), a query parameter whose name says it holds a secret is
masked up to the end of the URL's next parameter, and a URL that cannot be read
at all is not shown. When in doubt, more is masked, never less.
"""

from __future__ import annotations

import re
from typing import Any, List, Mapping, Sequence, Union

__all__ = ["redact", "redact_options", "is_secret_name", "split_urls", "ambiguous_credentials", "MASK"]

MASK = "***"

#: Option and query parameter names that hold a secret: ``password``, ``ssl_keyfile_password``,
#: ``ssl_password``, a token, a credential provider...
_SECRET_NAME = re.compile(r"pass|secret|token|credential", re.IGNORECASE)

#: Where one URL of a ``;``-joined list (Sentinel) starts: a ``;`` followed by a scheme. A ``;`` inside a
#: password is followed by anything else.
_NEXT_URL = re.compile(r";\s*(?=[A-Za-z][A-Za-z0-9+.-]*://)")

#: A user name: up to the first ``:`` (a password follows) or ``@`` (none does); no ``/?#`` in it.
_USER = re.compile(r"[^:/?#@]*")

#: A query parameter: its name and ``=`` (group 1), the name alone (group 2), then its value.
_SECRET_PARAM = re.compile(r"([?&]([^=&?]*)=)[^&?]*")


def is_secret_name(name: Any) -> bool:
    """Whether an option or query parameter of this name holds a secret."""
    return isinstance(name, str) and bool(_SECRET_NAME.search(name))


def split_urls(url: str) -> List[str]:
    """The URLs of a ``;``-joined list (Sentinel's), without cutting a password that contains ``;``."""
    return [part.strip() for part in _NEXT_URL.split(url)]


def ambiguous_credentials(url: str) -> bool:
    """Whether an ``@`` comes after a ``/``, ``?`` or ``#``: a password with one of them unencoded (or an ``@``
    in a query value), which URL parsers, redis-py's included, cut in the wrong place."""
    rest = url.partition("://")[2]
    if "@" not in rest:
        return False
    delimiters = [rest.find(c) for c in "/?#" if c in rest]
    return bool(delimiters) and min(delimiters) < rest.rindex("@")


def _redact_query(query: str) -> str:
    """``a=1&password=x&b=2`` as ``a=1&password=***&b=2``; a part without ``=`` may be a password's tail."""
    shown = []
    for pair in query.split("&"):
        name, equals, _ = pair.partition("=")
        if not equals:
            shown.append(MASK if pair else pair)
        else:
            shown.append(f"{name}={MASK}" if is_secret_name(name) else pair)
    return "&".join(shown)


def _redact_one(url: str) -> str:
    scheme, separator, rest = url.partition("://")
    if not separator:
        return "<unreadable URL>" if "@" in url or is_secret_name(url) else url
    # First the query's secrets, wherever a "?" is: a value may hold an "@" that would pass for the end
    # of the credentials.
    rest = _SECRET_PARAM.sub(lambda found: found.group(1) + MASK if is_secret_name(found.group(2))
                             else found.group(0), rest)
    user = _USER.match(rest)
    end = user.end() if user else 0
    credentials = ""
    if end < len(rest) and "@" in rest[end:]:
        if rest[end] == ":":
            credentials = f"{rest[:end]}:{MASK}@"
        elif rest[end] == "@":
            # A name alone; several "@" and what the name is cannot be told.
            credentials = f"{rest[:end]}@" if rest.count("@") == 1 else f"{MASK}@"
        if credentials:
            rest = rest[rest.rindex("@") + 1:]
    where, question, query = rest.partition("?")
    return f"{scheme}://{credentials}{where}" + (f"?{_redact_query(query)}" if question else "")


def redact(url: Union[str, Sequence[str]]) -> str:
    """The lock URL (or URLs) fit for a log line: passwords, in the credentials or the query, as ``***``."""
    if isinstance(url, str):
        return ";".join(_redact_one(part) for part in split_urls(url))
    if isinstance(url, (list, tuple)):
        return ", ".join(redact(one) if isinstance(one, str) else MASK for one in url)
    return MASK


def redact_options(options: Any) -> Any:
    """Client options (``singleton_lock_transport_options``) fit to print: secrets masked, nested ones too.

    A value under a secret-sounding name is masked whatever it is; a string that
    looks like a URL is redacted as one.
    """
    if isinstance(options, Mapping):
        return {name: MASK if is_secret_name(name) else redact_options(value) for name, value in options.items()}
    if isinstance(options, (list, tuple)):
        return type(options)(redact_options(value) for value in options)
    if isinstance(options, str) and "://" in options:
        return redact(options)
    return options
