"""ByokKey.serves_models: an Azure key's routing facts in the clear, so planning never decrypts a key. Existing
Azure keys are summarized once here (the only decryption outside byok.selectors, at migration time); a key
the keyring cannot open is left null (any model: its attempt then finds out)."""

from django.db import migrations, models


def summarize_azure_keys(apps, schema_editor) -> None:
    from byok.crypto import Sealed, SecretsError, unseal
    from byok.shapes import azure_serves, restore

    ByokKey = apps.get_model("byok", "ByokKey")
    for key in ByokKey.objects.filter(kind="azure", serves_models__isnull=True).iterator():
        try:
            material = unseal(Sealed(key_id=key.key_id, blob=bytes(key.sealed)), aad=f"byok:{key.id}")
        except SecretsError:
            continue
        configs = restore(kind="azure", material=material).extra
        key.serves_models = azure_serves(configs if isinstance(configs, list) else [])
        key.save(update_fields=["serves_models"])


class Migration(migrations.Migration):
    dependencies = [
        ("byok", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="byokkey",
            name="serves_models",
            field=models.JSONField(
                blank=True,
                editable=False,
                help_text="Azure keys: the model slugs their per-deployment configs serve ('*': a catalog config "
                "serves any model), kept in the clear so routing never decrypts a key to plan; null: any model",
                null=True,
            ),
        ),
        migrations.RunPython(summarize_azure_keys, migrations.RunPython.noop),
    ]
