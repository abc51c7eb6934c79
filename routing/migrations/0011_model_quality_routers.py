from django.db import migrations, models

ROUTERS = {
    "gateway/auto": (
        "Auto router",
        "Auto router: classifies the request's task type and routes to the best-ranked model for it "
        "(plugin auto-router: allowed_models, excluded_models, cost_tier, pin_model).",
    ),
    "gateway/auto-beta": (
        "Auto router (beta)",
        "Auto router (beta): as gateway/auto, without pin_model (plugin auto-beta-router).",
    ),
    "gateway/pareto-code": (
        "Pareto coding router",
        "Pareto coding router: the cheapest model of a coding-score tier, or the fastest with :nitro "
        "(plugin pareto-router: min_coding_score, max_price, price_source).",
    ),
    "gateway/fusion": (
        "Fusion",
        "Fusion: a panel of models answers in parallel, an analyst compares the answers and writes the final one "
        "(plugin fusion: analysis_models, model, preset).",
    ),
}


def routers_add(apps, schema_editor):
    Model = apps.get_model("routing", "Model")
    for model_id, (name, description) in ROUTERS.items():
        Model.objects.update_or_create(
            id=model_id,
            defaults={
                "kind": "router",
                "name": name,
                "description": description,
                "context_length": 2000000,
                "input_modalities": ["text", "image", "file"],
                "output_modalities": ["text"],
            },
        )


def routers_remove(apps, schema_editor):
    apps.get_model("routing", "Model").objects.filter(id__in=list(ROUTERS)).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("routing", "0010_model_kind"),
    ]

    operations = [
        migrations.AlterField(
            model_name="model",
            name="kind",
            field=models.CharField(
                choices=[
                    ("chat", "Chat (text generation)"),
                    ("embedding", "Embedding"),
                    (
                        "router",
                        "Router (chooses or combines chat models: gateway/auto, gateway/pareto-code, gateway/fusion)",
                    ),
                ],
                default="chat",
                max_length=20,
            ),
        ),
        migrations.AddField(
            model_name="model",
            name="task_scores",
            field=models.JSONField(
                blank=True, default=dict, help_text="Task type -> score 0-1 (types: routing.models.TASK_TYPES)"
            ),
        ),
        migrations.AddField(
            model_name="model",
            name="coding_score",
            field=models.FloatField(
                blank=True, null=True, help_text="0-1; pareto-router tiers: >= 0.66 high, >= 0.33 medium, below low"
            ),
        ),
        migrations.AddField(
            model_name="model",
            name="quality_source",
            field=models.TextField(blank=True, help_text="Where the scores come from (benchmark, date)"),
        ),
        migrations.RunPython(routers_add, routers_remove),
    ]
