"""``python -m celery_singleton_lock --app proj list``: the ``celery locks`` commands without Celery's launcher."""

from .cli.commands import main

if __name__ == "__main__":
    main()
