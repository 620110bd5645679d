import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    """[Q1, R7] Each pool's count of the entries that hold a term, counted from the term rows
    already stored."""

    dependencies = [
        ("memory", "0012_entry_said_at"),
        ("openbot", "0005_learning_consent"),
    ]

    operations = [
        migrations.CreateModel(
            name="PoolTerm",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("term", models.CharField(max_length=32)),
                ("entries", models.IntegerField()),
                (
                    "bot",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="openbot.bot",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("bot", "term"), name="one_count_per_pool_term")
                ],
            },
        ),
        migrations.RunSQL(
            "INSERT INTO memory_poolterm (bot_id, term, entries)"
            " SELECT bot_id, term, COUNT(*) FROM memory_entryterm GROUP BY bot_id, term",
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
