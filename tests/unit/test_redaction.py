"""No text the library prints shows a secret of the lock store's settings (no Redis needed).

Given a lock URL whose password holds a character that URL parsers cut at
(``#``, ``?``, ``/``, ``@``, ``;``), a secret in a query parameter, or secrets in
the transport options, when the URL is refused, the settings are ``repr``-ed, or
Celery prints the app's settings (``celery report``, ``celery inspect conf``),
then the password appears nowhere and the host still does.
"""

from __future__ import annotations

import traceback

import pytest
from celery import Celery

import celery_singleton_lock  # noqa: F401 - installs the censoring of Celery's settings table
from celery_singleton_lock.exceptions import ConfigurationError
from celery_singleton_lock.config.settings import resolve_settings
from celery_singleton_lock.store import redact, redact_options

SECRET = "Xy7zzq"


@pytest.mark.parametrize("url, shown", [
    (f"redis://u:pa#{SECRET}@h:6379/0", "redis://u:***@h:6379/0"),
    (f"redis://u:pa?{SECRET}@h:6379/0", "redis://u:***@h:6379/0"),
    (f"redis://u:pa/{SECRET}@h:6379/0", "redis://u:***@h:6379/0"),
    (f"redis://:p@{SECRET}#/x@h/0", "redis://:***@h/0"),
    (f"redis://h:6379/0?password=se@{SECRET}", "redis://h:6379/0?password=***"),
    (f"redis://h/0?password=ab#{SECRET}", "redis://h/0?password=***"),
    (f"redis://h/0?password=ab?{SECRET}&db=1", "redis://h/0?password=***&db=1"),
    (f"redis://h/0?password=ab&{SECRET}", "redis://h/0?password=***&***"),
    (f"rediss://h:6380/0?ssl_keyfile_password={SECRET}&ssl_ca_certs=/ca.pem",
     "rediss://h:6380/0?ssl_keyfile_password=***&ssl_ca_certs=/ca.pem"),
    (f"sentinel://:pa;{SECRET}@h1:1;sentinel://:pa;{SECRET}@h2:2", "sentinel://:***@h1:1;sentinel://:***@h2:2"),
    (f"redis://u@pa@{SECRET}@h", "redis://***@h"),
    (f"u:{SECRET}@h:6379", "<unreadable URL>"),
    ("redis://user@h/0", "redis://user@h/0"),
])
def test_a_password_parsers_cut_in_the_wrong_place_is_still_masked(url, shown):
    assert redact(url) == shown
    assert SECRET not in redact([url, url])


@pytest.mark.parametrize("url", [f"redis://u:pa#{SECRET}@h:6379/0", f"redis://u:12/{SECRET}@h:1/0",
                                 f"redis://u:pa?{SECRET}@h/0"])
def test_the_cannot_be_read_error_shows_no_part_of_the_password(url):
    with pytest.raises(ConfigurationError) as refused:
        resolve_settings({"singleton_lock_url": url})

    text = str(refused.value)
    assert "cannot be read" in text and "'redis://" in text
    traceback_text = "".join(traceback.format_exception(type(refused.value), refused.value, refused.tb))
    assert SECRET not in traceback_text  # as a worker prints it: the chained errors too


def test_the_settings_repr_shows_no_secret():
    settings = resolve_settings({
        "singleton_lock_url": f"rediss://u:{SECRET}@h:6380/1?ssl_keyfile_password={SECRET}",
        "singleton_lock_transport_options": {"ssl_keyfile_password": SECRET, "ssl_certfile": "/c.crt",
                                             "sentinel_kwargs": {"password": SECRET}, "master_name": "m"}})

    shown = repr(settings)
    assert SECRET not in shown
    assert "rediss://u:***@h:6380/1?ssl_keyfile_password=***" in shown and "/c.crt" in shown


def test_transport_options_keep_what_is_no_secret():
    options = {"password": SECRET, "ssl_password": SECRET, "credential_provider": object(),
               "sentinel_kwargs": {"password": SECRET, "socket_timeout": 1}, "socket_timeout": 2}
    assert redact_options(options) == {"password": "***", "ssl_password": "***", "credential_provider": "***",
                                       "sentinel_kwargs": {"password": "***", "socket_timeout": 1},
                                       "socket_timeout": 2}


@pytest.mark.parametrize("url", [f"redis://u:{SECRET}@h:6379/0?ssl_keyfile_password={SECRET}",
                                 [f"redis://:{SECRET}@a:1/0", f"redis://:{SECRET}@b:1/0"]])
def test_celery_prints_the_settings_without_our_secrets(url):
    app = Celery("censored", broker="memory://", set_as_current=False)
    app.conf.singleton_lock_url = url
    app.conf.singleton_lock_transport_options = {"ssl_keyfile_password": SECRET, "sentinel_kwargs": {"password": SECRET}}

    table, report = app.conf.table(), app.conf.humanize()

    assert SECRET not in repr(table) and SECRET not in report
    assert "***@" in repr(table["singleton_lock_url"])
    assert isinstance(table["singleton_lock_url"], type(url) if isinstance(url, str) else list)
