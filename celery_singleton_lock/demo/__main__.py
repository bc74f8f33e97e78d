"""``python -m celery_singleton_lock.demo``: see :mod:`.runner`."""

import sys

from .runner import main

sys.exit(main())
