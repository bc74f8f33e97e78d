"""What someone else chose is printed with its control characters escaped (no Redis needed)."""

from __future__ import annotations

import logging

import pytest

import celery_singleton_lock  # noqa: F401 - installs the log filter
from celery_singleton_lock.printable import printable


@pytest.mark.parametrize("text, shown", [
    ("plain-id 42", "plain-id 42"),
    ("a\nb\r\tc", "a\\nb\\r\\tc"),
    ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),
    ("\x9b31m", "\\x9b31m"),  # the one-byte CSI
    ("abc\u202edef\u2028", "abc\\u202edef\\u2028"),
    ("caf\u00e9 \u6f22\u5b57", "caf\u00e9 \u6f22\u5b57"),  # letters of every script stay readable
    (17, "17"),
])
def test_control_and_invisible_characters_are_shown_as_escapes(text, shown):
    assert printable(text) == shown


def test_every_log_line_of_the_package_escapes_what_it_quotes(caplog):
    logger = logging.getLogger("celery_singleton_lock")
    with caplog.at_level(logging.INFO, logger="celery_singleton_lock"):
        logger.info("task %s[%s] held by %s pid %d", "proj.job", "id\n[fake] line\x1b[2J", "host\x07", 7)

    [message] = caplog.messages
    assert message == "task proj.job[id\\n[fake] line\\x1b[2J] held by host\\x07 pid 7"
