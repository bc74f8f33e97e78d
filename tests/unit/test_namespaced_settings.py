"""Settings given under Celery's namespace (``config_from_object(..., namespace="CELERY")``, every
Django project): read, checked with the key named as written, and masked where Celery prints them."""

from __future__ import annotations

import types

import pytest
from celery import Celery
from celery.app.utils import filter_hidden_settings

from celery_singleton_lock import ConfigurationError, LockedTask
from celery_singleton_lock.config.settings import resolve_settings


def _app(**settings):
    """An app configured as a Django project configures it: an object of upper-case settings."""
    source = types.SimpleNamespace(CELERY_BROKER_URL="memory://", INSTALLED_APPS=[], **settings)
    app = Celery("proj", set_as_current=False)
    app.config_from_object(source, namespace="CELERY")
    return app


def test_namespaced_settings_are_read():
    app = _app(CELERY_SINGLETON_LOCK_URL="redis://lock-host:6380/2", CELERY_SINGLETON_LOCK_PREFIX="web",
               CELERY_SINGLETON_LOCK_TTL=12)

    @app.task(base=LockedTask, shared=False)
    def job(account_id):
        pass

    app.finalize()
    assert resolve_settings(app.conf).url == "redis://lock-host:6380/2"
    assert resolve_settings(app.conf).prefix == "web"
    assert job.singleton_lock()[0].ttl == 12.0


@pytest.mark.parametrize("written, closest", [
    ("CELERY_SINGLETON_LOCK_TLL", "CELERY_SINGLETON_LOCK_TTL"),
    ("CELERY_SINGLETON_LOCK_URLS", "CELERY_SINGLETON_LOCK_URL"),
    ("CELERY_SINGLETON_LOCK_ONLOCKED", "CELERY_SINGLETON_LOCK_ON_LOCKED"),
])
def test_a_misspelled_namespaced_setting_is_refused_when_the_app_is_finalized(written, closest):
    app = _app(CELERY_SINGLETON_LOCK_URL="redis://lock-host/1", **{written: 5})
    with pytest.raises(ConfigurationError, match=f"unknown setting {written}: did you mean {closest}\\?"):
        app.finalize()


def test_a_misspelled_setting_is_refused_even_without_a_locked_task():
    app = Celery("plain", set_as_current=False)
    app.conf.singleton_lock_tll = 5
    with pytest.raises(ConfigurationError, match="app.conf.singleton_lock_tll: did you mean singleton_lock_ttl"):
        app.finalize()


@pytest.mark.parametrize("written, value, message", [
    ("CELERY_SINGLETON_LOCK_ON_LOCKED", "skipp", "CELERY_SINGLETON_LOCK_ON_LOCKED = 'skipp' is wrong: "
                                                 "on_locked='skipp' is not one of 'skip'"),
    ("CELERY_SINGLETON_LOCK_TTL", -1, "CELERY_SINGLETON_LOCK_TTL = -1 is wrong: lock_ttl=-1 must be > 0"),
    ("CELERY_SINGLETON_LOCK_RETRY_MAX", "3", "CELERY_SINGLETON_LOCK_RETRY_MAX = '3' is wrong"),
    ("CELERY_SINGLETON_LOCK_LIMIT", 0, "CELERY_SINGLETON_LOCK_LIMIT = 0 is wrong"),
])
def test_a_wrong_app_wide_default_is_refused_at_finalize_though_every_task_sets_its_own(written, value, message):
    app = _app(CELERY_SINGLETON_LOCK_URL="redis://lock-host/1", **{written: value})

    @app.task(base=LockedTask, shared=False, on_locked="raise", lock_ttl=5, lock_retry_max=1, lock_limit=1)
    def job(account_id):
        pass

    with pytest.raises(ConfigurationError, match=message):
        app.finalize()


def test_a_wrong_plain_app_wide_default_is_named_as_app_conf():
    app = Celery("plain", set_as_current=False)
    app.conf.singleton_lock_on_locked = "skipp"
    with pytest.raises(ConfigurationError, match="app-wide default app.conf.singleton_lock_on_locked = 'skipp'"):
        app.finalize()


def test_namespaced_secrets_are_masked_where_celery_prints_settings():
    app = _app(CELERY_SINGLETON_LOCK_URL="redis://:hunter2@lock-host:6379/1",
               CELERY_SINGLETON_LOCK_TRANSPORT_OPTIONS={"ssl_password": "keypass", "password": "hunter3",
                                                        "socket_timeout": 2})
    shown = app.conf.humanize()  # what `celery report` prints
    table = filter_hidden_settings(dict(app.conf.table()))  # what `celery inspect conf` sends
    for text in (shown, repr(table), repr(resolve_settings(app.conf))):
        assert "hunter2" not in text and "hunter3" not in text and "keypass" not in text
    assert "lock-host" in shown and "socket_timeout" in shown


def test_a_missing_lock_url_is_named_as_the_settings_spell_it():
    app = _app()  # a memory:// broker, no lock URL
    with pytest.raises(ConfigurationError, match=r"set app.conf.singleton_lock_url \(CELERY_SINGLETON_LOCK_URL in "
                                                 r"the settings\)"):
        resolve_settings(app.conf)
