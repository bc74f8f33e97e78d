"""A live demo of celery-singleton-lock: real Redis, a real prefork worker, a real beat.

``python -m celery_singleton_lock.demo`` (or ``bash scripts/demo.sh``) starts an
embedded redis-server when nothing answers at ``REDIS_URL``, a worker and a beat
on :mod:`.app`, sends bursts of duplicate and distinct calls for every
``on_locked`` policy plus a beat job slower than its schedule, shows what runs,
what was skipped, retried, waited or refused and who holds which lock, then
prints a summary whose overlap count comes from the intervals the task bodies
recorded in Redis. It stops everything it started and deletes every key it made.

Modules: :mod:`.config` (where the demo's keys live), :mod:`.record` (what the
bodies and signals write, and reading it back), :mod:`.app` (the Celery app),
:mod:`.processes` (redis-server, worker and beat as child processes),
:mod:`.namespace` (claiming the namespace for one run, deleting its keys),
:mod:`.workload` (the bursts), :mod:`.live` (the terminal view),
:mod:`.report` (summary table and PNG timeline), :mod:`.runner` (all of it in order).
"""
