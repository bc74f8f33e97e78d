"""Text that someone else chose, made safe to print on an operator's terminal or in a log.

A task id, a host name or a task name in a lock comes from whoever published the
message or wrote the lock: anyone who can write to the broker, or the lock
store's ACL user. Printed raw, a newline in it forges a log line or a row of
``celery locks list``, and an escape sequence moves the cursor, recolours the
screen or retitles the terminal. :func:`printable` shows such characters as
Python escapes (``\\n``, ``\\x1b``, ``\\u202e``); every log line of the package
gets it through one filter on its logger, and the CLI passes what it prints
through it.
"""

from __future__ import annotations

import logging
import re
from typing import Any

__all__ = ["printable", "install_log_filter"]

#: Control characters (C0, DEL, C1), bidirectional and other invisible formatting, line and paragraph
#: separators, lone surrogates and tags: what a terminal obeys or a reader cannot see.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff"
                          "\ufff9-\ufffb\ud800-\udfff\U000e0000-\U000e007f]")


def _escape(found: "re.Match[str]") -> str:
    return found.group(0).encode("unicode_escape", "backslashreplace").decode("ascii")


def printable(text: Any) -> str:
    """``str(text)`` with every control or invisible formatting character shown as its Python escape."""
    return _UNPRINTABLE.sub(_escape, text if isinstance(text, str) else str(text))


class _EscapeArguments(logging.Filter):
    """Escape the string arguments of a record (the message's own text is the package's, left alone)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple):
            record.args = tuple(printable(arg) if isinstance(arg, str) else arg for arg in args)
        elif isinstance(args, dict):
            record.args = {name: printable(arg) if isinstance(arg, str) else arg for name, arg in args.items()}
        return True


_FILTER = _EscapeArguments()


def install_log_filter(name: str = "celery_singleton_lock") -> None:
    """Escape what the package's log lines quote (idempotent; the logger's children log no foreign text)."""
    logging.getLogger(name).addFilter(_FILTER)
