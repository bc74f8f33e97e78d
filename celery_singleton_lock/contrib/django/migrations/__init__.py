"""The Django app's migrations: the unmanaged ``Lock`` model, so ``migrate`` creates its permission."""
