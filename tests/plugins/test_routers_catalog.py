"""The routers' test catalog (five stand-in models of known prices and quality scores, one provider each so a
model's behaviour can be scripted on its base URL) and the catalog loader's checks of the quality data."""

from urllib.parse import quote

import pytest

from routing.models import Model, Provider
from routing.services import CatalogError, catalog_load, provider_credential_set
from tests.support import STANDIN_KEY

# id: (prompt, completion USD per million tokens, task scores, coding score). Price percentiles among the five:
# alpha 0, beta 20, gamma 40, delta 60, epsilon 80 (one model per cost tier band).
MODELS = {
    "acme/alpha": (0.1, 0.2, {"coding": 0.3, "writing": 0.9, "chat": 0.8}, 0.2),
    "acme/beta": (0.5, 1.0, {"coding": 0.6, "writing": 0.5, "chat": 0.6}, 0.5),
    "bolt/gamma": (1.0, 2.0, {"coding": 0.8, "writing": 0.6, "math": 0.7}, 0.7),
    "bolt/delta": (2.0, 4.0, {"coding": 0.95, "math": 0.9, "writing": 0.7}, 0.9),
    "corp/epsilon": (5.0, 10.0, {"coding": 0.9, "reasoning": 0.95, "writing": 0.95}, 0.8),
}


def provider_slug(model_id: str) -> str:
    return "rt-" + model_id.split("/")[1]


def routers_catalog(standin, scripts: dict[str, str] | None = None, models: dict | None = None) -> None:
    """Load MODELS (or `models`), each on its own stand-in provider; `scripts`: model id -> the stand-in's
    `/s/<script>/` behaviour for that model (latency_ms=300, status=500, text=...)."""
    scripts = scripts or {}
    models = models or MODELS
    catalog_load(
        data={
            "providers": [
                {
                    "slug": provider_slug(model_id),
                    "name": provider_slug(model_id),
                    "adapter": "openai_chat",
                    "base_url": f"{standin.url}"
                    + (f"/s/{quote(scripts[model_id])}" if model_id in scripts else "")
                    + "/v1",
                    "allow_private_network": True,
                    "zdr": True,
                    "retains_prompts": False,
                }
                for model_id in models
            ],
            "models": [
                {
                    "id": model_id,
                    "name": model_id,
                    "context_length": 32768,
                    "input_modalities": ["text"],
                    "task_scores": scores,
                    "coding_score": coding,
                    "quality_source": "test fixture",
                    "endpoints": [
                        {
                            "provider": provider_slug(model_id),
                            "upstream_model": model_id.split("/")[1],
                            "pricing": {"prompt": prompt, "completion": completion},
                        }
                    ],
                }
                for model_id, (prompt, completion, scores, coding) in models.items()
            ],
        }
    )
    for model_id in models:
        provider_credential_set(provider=Provider.objects.get(slug=provider_slug(model_id)), plaintext=STANDIN_KEY)
    standin.clear()


def test_catalog_loads_quality_data(db, standin):
    routers_catalog(standin)
    delta = Model.objects.get(pk="bolt/delta")
    assert delta.task_scores["coding"] == 0.95 and delta.coding_score == 0.9 and delta.quality_source


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("task_scores", {"cooking": 0.5}, "unknown task types"),
        ("task_scores", {"coding": 1.5}, "from 0 to 1"),
        ("task_scores", [0.5], "must be an object"),
        ("coding_score", -0.1, "coding_score must be"),
    ],
)
def test_catalog_refuses_bad_quality_data(db, field, value, says):
    row = {"id": "acme/bad", "name": "bad", "context_length": 1000, field: value}
    with pytest.raises(CatalogError, match=says):
        catalog_load(data={"models": [row]})


def test_router_slugs_are_catalog_rows_listed_in_models(db, alice, standin):
    routers_catalog(standin)
    listed = {m["id"]: m for m in alice.client().get("/api/v1/models").json()["data"]}
    for slug in ("gateway/auto", "gateway/auto-beta", "gateway/pareto-code", "gateway/fusion"):
        assert slug in listed and listed[slug]["description"], slug
        assert listed[slug]["pricing"]["prompt"] == "-1"  # priced by the model it routes to
    assert "acme/alpha" in listed
