"""The unmanaged ``Lock`` model: no table, only the ``release_lock`` permission ``migrate`` creates."""

from typing import List, Tuple

from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies: List[Tuple[str, str]] = []

    operations = [
        migrations.CreateModel(
            name="Lock",
            fields=[("id", models.AutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID"))],
            options={
                "verbose_name": "lock",
                "verbose_name_plural": "locks",
                "managed": False,
                "default_permissions": (),
                "permissions": [("release_lock", "Can release a lock from the locks page")],
            },
        ),
    ]
