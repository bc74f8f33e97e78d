"""Option resolution and validation, at definition time (no Redis, no worker)."""

from __future__ import annotations

import pytest
from celery import Celery

from celery_singleton_lock import ConfigurationError, LockedTask
from celery_singleton_lock.config.options import resolve_options
from celery_singleton_lock.config.settings import resolve_settings


def resolve(conf=None, **attrs):
    return resolve_options("t", attrs.get, conf or {})


def test_defaults():
    options = resolve()
    assert (options.scope, options.on_locked, options.ttl, options.heartbeat) == ("running", "skip", 30.0, 10.0)
    assert (options.queue_ttl, options.retry_delay, options.retry_max, options.wait_timeout) == (3600.0, 5.0, None, 30.0)
    assert options.on_lock_error == "retry"


def test_task_attributes_win_over_app_settings():
    options = resolve({"singleton_lock_ttl": 60, "singleton_lock_on_locked": "raise"}, lock_ttl=9)
    assert options.ttl == 9 and options.heartbeat == 3 and options.on_locked == "raise"


@pytest.mark.parametrize("attrs, message", [
    ({"lock_scope": "forever"}, "lock_scope='forever' is not one of"),
    ({"on_locked": "ignore"}, "on_locked='ignore' is not one of"),
    ({"on_lock_error": "skip"}, "on_lock_error='skip' is not one of"),
    ({"lock_ttl": 0}, "lock_ttl=0 must be > 0"),
    ({"lock_ttl": "30"}, "lock_ttl must be a number of seconds"),
    ({"lock_ttl": 10, "lock_heartbeat": 10}, "lock_heartbeat=10.0 must be shorter than lock_ttl=10.0"),
    ({"lock_retry_max": -1}, "lock_retry_max must be None or an int >= 0"),
    ({"lock_scope": "queued_or_running", "on_locked": "wait"}, 'on_locked="wait" makes no sense'),
])
def test_wrong_values_are_refused_with_what_is_allowed(attrs, message):
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(").replace("=", "=")):
        resolve(**attrs)


def test_settings_fall_back_to_a_redis_broker():
    assert resolve_settings({"broker_url": "redis://h:1/3"}).url == "redis://h:1/3"
    assert resolve_settings({"singleton_lock_url": "rediss://u:p@h:1/0"}).url == "rediss://u:p@h:1/0"
    with pytest.raises(ConfigurationError, match="scheme must be"):
        resolve_settings({"singleton_lock_url": "http://h"})


@pytest.mark.parametrize("broker", ["amqp://guest@h//", "memory://", "sqs://", None])
def test_no_lock_url_and_a_broker_that_is_not_redis_is_refused(broker):
    # A silent redis://127.0.0.1 default would be a different Redis on every host: no exclusion at all.
    with pytest.raises(ConfigurationError, match="singleton_lock_url is not set") as info:
        resolve_settings({"broker_url": broker})
    assert "set app.conf.singleton_lock_url" in str(info.value)


@pytest.mark.parametrize("url", ["redis://", "redis:///0", "rediss://:secret@/1", "unix://", "redis+cluster://",
                                 "sentinel://;sentinel://h:26379"])
def test_a_lock_url_without_a_host_is_refused(url):
    conf = {"singleton_lock_url": url, "singleton_lock_transport_options": {"master_name": "m"}}
    with pytest.raises(ConfigurationError, match="names no (host|socket path).*set singleton_lock_url") as info:
        resolve_settings(conf)
    assert "secret" not in str(info.value)


def test_a_redis_broker_url_without_a_host_is_no_lock_url_either():
    with pytest.raises(ConfigurationError, match="names no host"):
        resolve_settings({"broker_url": "redis://"})


@pytest.mark.parametrize("urls", [
    ["redis://127.0.0.1:7001", "redis://127.0.0.1:7001", "redis://127.0.0.1:7002"],
    ["redis://localhost:7001", "redis://127.0.0.1:7001/0", "redis://127.0.0.1:7002"],
    ["redis://127.0.0.1:7001/", "redis://:pw@LOCALHOST:7001?db=0", "redis://127.0.0.1:7002"],
    ["redis://h1", "redis://h1:6379/0", "redis://h2"],
    ["rediss://h1:7000/2", "redis://h1:7000/2", "redis://h2:7000/2"],
    ["unix:///tmp/r.sock", "unix:///tmp/../tmp/r.sock?db=0", "redis://h2"],
])
def test_a_quorum_naming_one_server_twice_is_refused(urls):
    with pytest.raises(ConfigurationError, match="names one Redis server twice") as info:
        resolve_settings({"singleton_lock_url": urls})
    assert "pw" not in str(info.value)


def test_a_quorum_of_distinct_servers_or_databases_is_accepted():
    urls = ["redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7001/1", "redis://h:7001"]
    assert resolve_settings({"singleton_lock_url": urls}).url == tuple(urls)


def _finalized_app():
    app = Celery("defs", broker="memory://", set_as_current=False)
    app.conf.singleton_lock_url = "redis://127.0.0.1:6379/0"  # never connected to here
    app.finalize()
    return app


@pytest.mark.parametrize("options", [
    {"lock_scope": "sometimes"},
    {"lock_ttl": 5, "lock_heartbeat": 6},
    {"lock_key": ("missing",)},
])
def test_a_wrong_task_definition_fails_when_the_task_is_defined(options):
    app = _finalized_app()
    with pytest.raises(ConfigurationError):
        @app.task(base=LockedTask, shared=False, **options)
        def job(account_id):
            pass


def test_a_lazy_app_refuses_at_first_use_before_publishing():
    app = Celery("lazy", broker="memory://", set_as_current=False)
    app.conf.singleton_lock_url = "redis://127.0.0.1:6379/0"

    @app.task(base=LockedTask, shared=False, lock_scope="sometimes")
    def job(account_id):
        pass

    with pytest.raises(ConfigurationError, match="lock_scope='sometimes'"):
        job.delay(1)


def test_bound_task_self_is_not_part_of_the_key():
    app = _finalized_app()

    @app.task(base=LockedTask, shared=False, bind=True, lock_key=("account_id",))
    def job(self, account_id, payload=None):
        pass

    assert job.lock_digest((1, "a"), {}) == job.lock_digest((1,), {"payload": "b"})


@pytest.mark.parametrize("setting, value, message", [
    ("singleton_lock_url", "http://h:1/0", "scheme must be"),
    ("singleton_lock_prefix", "{bad}", "without braces"),
    ("singleton_lock_transport_options", 5, "dict of redis-py options"),
])
def test_a_wrong_app_setting_fails_when_a_task_is_defined(setting, value, message):
    app = _finalized_app()
    app.conf[setting] = value
    with pytest.raises(ConfigurationError, match=message):
        @app.task(base=LockedTask, shared=False)
        def job(account_id):
            pass


@pytest.mark.parametrize("setting, closest", [
    ("singleton_lock_urls", "singleton_lock_url"),
    ("singleton_lock_tll", "singleton_lock_ttl"),
    ("singleton_lock_onlocked", "singleton_lock_on_locked"),
])
def test_a_misspelled_app_setting_is_refused_when_a_task_is_defined(setting, closest):
    app = _finalized_app()
    app.conf[setting] = 5
    with pytest.raises(ConfigurationError, match=f"app.conf.{setting}: did you mean {closest}"):
        @app.task(base=LockedTask, shared=False)
        def job(account_id):
            pass


def test_the_lock_url_follows_the_broker_url_celery_reads_from_the_environment(monkeypatch):
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://from-env:6379/4")  # what `celery -b URL` sets
    app = Celery("env", broker="amqp://guest@h//", set_as_current=False)
    assert resolve_settings(app.conf).url == "redis://from-env:6379/4"


@pytest.mark.parametrize("options, closest", [
    ({"lock_tll": 5}, "lock_ttl"),
    ({"on_lockd": "retry"}, "on_locked"),
    ({"on_lock_eror": "run"}, "on_lock_error"),
    ({"lock_keys": ("account_id",)}, "lock_key"),
    ({"lock_heartbeet": 1}, "lock_heartbeat"),
])
def test_a_misspelled_option_is_refused_when_the_task_is_defined(options, closest):
    app = _finalized_app()
    with pytest.raises(ConfigurationError, match=f"unknown lock option {next(iter(options))}=.*did you mean "
                                                 f"{closest}\\?"):
        @app.task(base=LockedTask, shared=False, **options)
        def job(account_id):
            pass


def test_a_misspelled_option_of_a_lazy_app_is_refused_when_the_task_is_bound():
    app = Celery("lazy", broker="memory://", set_as_current=False)
    app.conf.singleton_lock_url = "redis://127.0.0.1:6379/0"

    @app.task(base=LockedTask, shared=False, lock_tll=5)
    def job(account_id):
        pass

    with pytest.raises(ConfigurationError, match="unknown lock option lock_tll=5: did you mean lock_ttl"):
        app.finalize()


def test_a_misspelled_option_on_a_subclass_is_refused():
    app = _finalized_app()

    class Base(LockedTask):
        abstract = True
        lock_scopes = "queued"

    with pytest.raises(ConfigurationError, match="lock_scopes='queued': did you mean lock_scope"):
        @app.task(base=Base, shared=False)
        def job(account_id):
            pass


def test_names_the_task_class_itself_uses_are_no_typos():
    app = _finalized_app()

    class Base(LockedTask):
        abstract = True
        lock_ttl = 12

        def lock_owner_name(self):  # a helper method of the user's own base class
            return "me"

        @property
        def lock_label(self):
            return "label"

    @app.task(base=Base, shared=False, bind=True, on_locked="raise")
    def job(self, account_id):
        return self.lock, self.lock_digest((account_id,), {})

    assert job.singleton_lock()[0].ttl == 12 and job.lock_owner_name() == "me"


def test_debounce_implies_replace_and_keeps_its_max():
    options = resolve({"singleton_lock_on_locked": "retry"}, lock_debounce=0.5, lock_debounce_max=2)
    assert (options.debounce, options.debounce_max, options.on_locked) == (0.5, 2.0, "replace")
    assert options.latest_wins and not resolve().latest_wins and resolve().debounce is None


@pytest.mark.parametrize("attrs, message", [
    ({"lock_debounce": 0}, "lock_debounce=0 must be > 0"),
    ({"lock_debounce": "1"}, "lock_debounce must be a number of seconds"),
    ({"lock_debounce": 1, "lock_debounce_max": 1}, "lock_debounce_max=1.0 must be longer than lock_debounce=1.0"),
    ({"lock_debounce_max": 3}, "lock_debounce_max=3 needs lock_debounce"),
    ({"lock_debounce": 1, "on_locked": "skip"}, "on_locked='skip' contradicts lock_debounce=1"),
    ({"on_locked": "replace"}, 'on_locked="replace" needs lock_scope="queued" or "queued_or_running"'),
])
def test_wrong_debounce_and_replace_values_are_refused(attrs, message):
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(")):
        resolve(**attrs)


@pytest.mark.parametrize("scope", ["queued", "queued_or_running"])
def test_replace_goes_with_the_queued_scopes(scope):
    assert resolve(on_locked="replace", lock_scope=scope).latest_wins


DURATIONS = ["lock_ttl", "lock_heartbeat", "lock_queue_ttl", "lock_retry_delay", "lock_wait_timeout", "lock_window",
             "lock_debounce", "lock_debounce_max"]
IMPOSSIBLE = [float("nan"), float("inf"), float("-inf"), 1e16, 10 ** 13]


def _with_companions(option, value):
    """The option at ``value``, with what it needs beside it to be judged alone."""
    attrs = {option: value}
    if option == "lock_heartbeat":
        attrs["lock_ttl"] = 60
    if option == "lock_debounce_max":
        attrs["lock_debounce"] = 1
    return attrs


@pytest.mark.parametrize("value", IMPOSSIBLE, ids=repr)
@pytest.mark.parametrize("option", DURATIONS)
def test_a_duration_that_cannot_work_is_refused_at_definition_naming_the_option(option, value):
    app = _finalized_app()
    with pytest.raises(ConfigurationError, match=rf"task 'odd': {option}=") as info:
        @app.task(base=LockedTask, name="odd", shared=False, **_with_companions(option, value))
        def odd():
            pass
    assert "finite" in str(info.value) or "longer than" in str(info.value) or "must be >" in str(info.value)


@pytest.mark.parametrize("value", IMPOSSIBLE, ids=repr)
def test_an_app_wide_duration_that_cannot_work_is_refused_naming_the_setting_s_option(value):
    with pytest.raises(ConfigurationError, match="lock_window="):
        resolve({"singleton_lock_window": value})


@pytest.mark.parametrize("limit", [10 ** 7, 2 ** 63, 0, 1.5])
def test_a_limit_the_store_cannot_keep_is_refused(limit):
    with pytest.raises(ConfigurationError, match="lock_limit must be an int from 1 to 1000000"):
        resolve(lock_limit=limit)


def test_a_limit_function_answering_what_the_store_cannot_keep_is_refused_before_anything_is_locked():
    from celery_singleton_lock.calls.limits import call_limit

    options = resolve(lock_limit=lambda n: n)
    assert call_limit("t", options, (3,), {}).count == 3
    for answer in (10 ** 9, float("nan"), 0):
        with pytest.raises(ConfigurationError, match="the lock_limit function returned"):
            call_limit("t", options, (answer,), {})


def test_the_longest_duration_still_works():
    assert resolve(lock_window=10 ** 9).window == 1e9
