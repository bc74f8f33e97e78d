"""The library's errors keep their context through a result backend.

Given a ``LockedError`` (or any error of the library) stored as a task's failure,
when a caller reads it back through Celery's result backend with any result
serializer, then it is the same class with the same message, task, key and holder.
"""

from __future__ import annotations

import pickle

import pytest
from celery import Celery

from celery_singleton_lock import (ConfigurationError, LockBackendError, LockedError, SingletonLockError,
                                   UnencodableArgumentError)

ERRORS = [
    LockedError("held", task="proj.sync", key="p:{proj.sync}:ab", holder="holder-id"),
    UnencodableArgumentError("no form", task="proj.sync", parameter="payload"),
    LockBackendError("down", task="proj.sync", key="p:{proj.sync}:ab"),
    ConfigurationError("bad", task="proj.sync"),
]


@pytest.mark.parametrize("serializer", ["json", "msgpack", "pickle"])
@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_an_error_read_back_from_the_result_backend_keeps_its_context(serializer, error):
    app = Celery("errors", backend="redis://127.0.0.1:1/0")  # encoding only: never connects
    app.conf.result_serializer = serializer
    app.conf.result_accept_content = [serializer]
    backend = app.backend

    back = backend.exception_to_python(backend.decode(backend.encode(backend.prepare_exception(error))))

    assert type(back) is type(error) and isinstance(back, SingletonLockError)
    assert str(back) == str(error)
    assert vars(back) == vars(error)


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_an_error_survives_pickling(error):
    back = pickle.loads(pickle.dumps(error))
    assert str(back) == str(error) and vars(back) == vars(error)
