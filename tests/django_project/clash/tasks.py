"""Tasks a worker refuses: two that share a lock name but not its limit, and one whose heartbeat
could not work (a renewal every picosecond would keep a core busy)."""
from celery import shared_task

from celery_singleton_lock import LockedTask


@shared_task(base=LockedTask, lock_name="account", lock_key=("account_id",), lock_limit=2)
def sync_account(account_id):
    return account_id


@shared_task(base=LockedTask, lock_name="account", lock_key=("account_id",))
def delete_account(account_id):
    return account_id


@shared_task(base=LockedTask, lock_ttl=5, lock_heartbeat=1e-12)
def busy_heartbeat(account_id):
    return account_id
