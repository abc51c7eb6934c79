"""Two indexes fewer to maintain on every request's writes: the ledger's api_key index (its (api_key, kind,
created_at) index starts with the same column), and the generation id's varchar_pattern_ops copy that Django
adds to a character primary key for LIKE lookups (generation ids are only ever looked up whole)."""

import django.db.models.deletion
from django.db import migrations, models

LIKE_INDEX = "billing_generation_id_9b853e57_like"


def drop_like_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {LIKE_INDEX}")


def create_like_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {LIKE_INDEX} ON billing_generation (id varchar_pattern_ops)")


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0003_account_suspended"),
        ("billing", "0008_generation_router"),
    ]

    operations = [
        migrations.AlterField(
            model_name="ledgerentry",
            name="api_key",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                to="accounts.apikey",
            ),
        ),
        migrations.RunPython(drop_like_index, create_like_index, elidable=False),
    ]
