"""Every message about a setting names it as the user wrote it (``CELERY_SINGLETON_LOCK_URL`` under
Django's namespace, ``singleton_lock_url`` on ``app.conf``), and every wrong setting is found at once,
each on its own (what ``manage.py check`` reports)."""

from __future__ import annotations

import types

import pytest
from celery import Celery

from celery_singleton_lock import ConfigurationError
from celery_singleton_lock.config.settings import check_written_settings, resolve_settings, setting_problems
from celery_singleton_lock.metrics.registry import metrics_address


def _app(**settings):
    source = types.SimpleNamespace(CELERY_BROKER_URL="memory://", **settings)
    app = Celery("proj", set_as_current=False)
    app.config_from_object(source, namespace="CELERY")
    return app


@pytest.mark.parametrize("written, value, message", [
    ("CELERY_SINGLETON_LOCK_URL", "redis:///0", "CELERY_SINGLETON_LOCK_URL 'redis:///0' names no host"),
    ("CELERY_SINGLETON_LOCK_URL", "http://lock-host", "CELERY_SINGLETON_LOCK_URL 'http://lock-host': scheme"),
    ("CELERY_SINGLETON_LOCK_PREFIX", "a b", "CELERY_SINGLETON_LOCK_PREFIX 'a b' must be a string"),
    ("CELERY_SINGLETON_LOCK_TRANSPORT_OPTIONS", 3, "CELERY_SINGLETON_LOCK_TRANSPORT_OPTIONS must be a dict"),
    ("CELERY_SINGLETON_LOCK_DESCRIBE", "yes", "CELERY_SINGLETON_LOCK_DESCRIBE must be True or False, not 'yes'"),
])
def test_a_wrong_namespaced_setting_is_named_as_written(written, value, message):
    settings = {"CELERY_SINGLETON_LOCK_URL": "redis://lock-host/0", written: value}
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(")):
        resolve_settings(_app(**settings).conf)


def test_the_metrics_port_is_named_as_written():
    with pytest.raises(ConfigurationError, match="CELERY_SINGLETON_LOCK_METRICS_PORT must be a port number"):
        metrics_address(_app(CELERY_SINGLETON_LOCK_METRICS_PORT="nine").conf)
    with pytest.raises(ConfigurationError, match="^singleton_lock_metrics_port must be a port number"):
        metrics_address({"singleton_lock_metrics_port": "nine"})


def test_a_plain_setting_keeps_its_plain_name():
    with pytest.raises(ConfigurationError, match="^singleton_lock_url 'redis:///0' names no host"):
        resolve_settings({"singleton_lock_url": "redis:///0"})
    with pytest.raises(ConfigurationError, match="^singleton_lock_describe must be True or False"):
        check_written_settings({"singleton_lock_describe": "yes"})


def test_every_wrong_setting_is_found_at_once_each_on_its_own():
    conf = _app(CELERY_SINGLETON_LOCK_URL="redis:///0", CELERY_SINGLETON_LOCK_TLL=5,
                CELERY_SINGLETON_LOCK_ON_LOCKED="skipp", CELERY_SINGLETON_LOCK_DESCRIBE="yes",
                CELERY_SINGLETON_LOCK_PREFIX="a b").conf
    found = dict(setting_problems(conf))
    assert set(found) == {"", "singleton_lock_url", "singleton_lock_on_locked", "singleton_lock_describe",
                          "singleton_lock_prefix"}
    assert str(found[""]).startswith("unknown setting CELERY_SINGLETON_LOCK_TLL")
    assert "CELERY_SINGLETON_LOCK_ON_LOCKED = 'skipp'" in str(found["singleton_lock_on_locked"])
    assert setting_problems(_app(CELERY_SINGLETON_LOCK_URL="redis://lock-host/0").conf) == []


def test_the_lock_stores_own_words_name_the_settings_as_written():
    import redis

    from celery_singleton_lock.config.settings import named_as_written
    from celery_singleton_lock.store import permanent_problem

    problem = permanent_problem(redis.exceptions.ReadOnlyError("You can't write against a read only replica."),
                                None)
    assert problem is not None and "singleton_lock_url" in problem
    conf = _app(CELERY_SINGLETON_LOCK_URL="redis://lock-host/0").conf
    assert "CELERY_SINGLETON_LOCK_URL" in named_as_written(conf, problem)
    assert "singleton_lock_url" not in named_as_written(conf, problem)
    assert named_as_written({"singleton_lock_url": "redis://lock-host/0"}, problem) == problem
