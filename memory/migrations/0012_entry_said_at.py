from django.db import migrations, models


class Migration(migrations.Migration):
    """[R8] When an entry was said; an entry stored before knew only when it was stored."""

    dependencies = [
        ("memory", "0011_tag_pool_index_once"),
    ]

    operations = [
        migrations.AddField(
            model_name="entry",
            name="said_at",
            field=models.BigIntegerField(null=True),
        ),
        migrations.RunSQL(
            "UPDATE memory_entry SET said_at = created_at", reverse_sql=migrations.RunSQL.noop
        ),
        migrations.AlterField(
            model_name="entry",
            name="said_at",
            field=models.BigIntegerField(),
        ),
    ]
