"""What a worker receives: a call's arguments after a message serializer's round trip through kombu."""

from __future__ import annotations

from typing import Any, Dict, Tuple

from kombu.serialization import dumps, loads

from celery_singleton_lock.calls.arguments import ArgumentKey


def worker_sees(args: Any, kwargs: Any, serializer: str) -> Tuple[Any, Dict[str, Any]]:
    content_type, encoding, data = dumps((args, kwargs, {}), serializer)
    loaded_args, loaded_kwargs, _ = loads(data, content_type, encoding, accept=[content_type])
    return loaded_args, loaded_kwargs


def task(a, b=None, c="default"):  # type: ignore[no-untyped-def]
    pass


#: The key of ``task``'s calls, as both the publisher and the worker derive it.
KEY = ArgumentKey("proj.task", task)
