"""Optional integrations with frameworks the library does not depend on; each is imported only by
the projects that install it (the Django app: ``celery_singleton_lock.contrib.django``).

May import: any unit below (it sits on the top rung). Nothing in the package imports it, and it is
the only place a framework such as Django is imported.
"""
