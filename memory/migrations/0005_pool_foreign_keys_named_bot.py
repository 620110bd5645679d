"""The foreign keys that point at a bot are named `bot` (they were `pool`, which reads as `Pool`).

The indexes and the constraint that name the field are dropped before the rename and built again
after it (SQLite remakes the table to rename a foreign key and would otherwise build them on the
old name).
"""

from django.db import migrations, models

ORDER = ["sound", "status", "rank", "updated_at", "content_length"]


class Migration(migrations.Migration):
    dependencies = [("memory", "0004_plural_names")]

    operations = [
        migrations.RemoveIndex(model_name="entry", name="entry_admitted_order"),
        migrations.RemoveIndex(model_name="entrytag", name="tag_by_pool"),
        migrations.RemoveConstraint(model_name="change", name="one_change_per_version"),
        migrations.RenameField(model_name="entry", old_name="pool", new_name="bot"),
        migrations.RenameField(model_name="entrytag", old_name="pool", new_name="bot"),
        migrations.RenameField(model_name="change", old_name="pool", new_name="bot"),
        migrations.AddIndex(
            model_name="entry",
            index=models.Index(fields=["id", "bot", *ORDER], name="entry_admitted_order"),
        ),
        migrations.AddIndex(
            model_name="entrytag", index=models.Index(fields=["bot", "tag"], name="tag_by_pool")
        ),
        migrations.AddConstraint(
            model_name="change",
            constraint=models.UniqueConstraint(
                fields=["bot", "version"], name="one_change_per_version"
            ),
        ),
    ]
