"""One Redis: fences of 1,000 successive holders strictly increase; URL forms are validated early."""

from __future__ import annotations

import pytest

from celery_singleton_lock.exceptions import ConfigurationError
from celery_singleton_lock.config.settings import resolve_settings
from celery_singleton_lock.store import RedisBackend
from celery_singleton_lock.store.connect import open_store
from tests.integration.topo import strictly_increasing, successive_fences


def test_fences_strictly_increase_across_1000_holders(redis_server):
    store = open_store(redis_server.url, {})
    try:
        assert type(store) is RedisBackend
        assert strictly_increasing(successive_fences(store, "s:{t}:k", "s:{t}:fence", 1000))
    finally:
        store.close()


@pytest.mark.parametrize("url", ["redis+cluster://h1:7000,h2:7001", "rediss+cluster://h:7000",
                                 "sentinel://h:26379;sentinel://h2:26379", ["redis://a:1", "rediss://b:2"]])
def test_topology_urls_are_accepted(url):
    settings = resolve_settings({"singleton_lock_url": url, "singleton_lock_transport_options": {"master_name": "m"}})
    assert settings.url == (tuple(url) if isinstance(url, list) else url)


@pytest.mark.parametrize("url, message", [
    ("sentinel://h:26379", "master_name"),
    (["redis://a:1", "sentinel://b:2"], "quorum"),
    ("redis://a:1;redis://b:2", "only sentinel"),
    ("amqp://h", "scheme"),
])
def test_wrong_topology_urls_are_refused_early(url, message):
    with pytest.raises(ConfigurationError, match=message):
        resolve_settings({"singleton_lock_url": url})
