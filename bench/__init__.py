"""Benchmarks of celery-singleton-lock against its peers; run them all with ``python -m bench``.

Sections: micro (acquire+release against the raw floor and the peers), cluster
(one task's locks over the masters of local Redis Clusters), publish cost, end
to end through real workers, duplicate storm, heartbeat and key derivation, and
a profile of the hot path. Results go to ``docs/benchmarks.md`` and
``docs/bench-*.png``. ``--smoke`` runs every section in a tiny size (the test
suite does, so the bench cannot rot).
"""
