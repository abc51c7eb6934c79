"""The fusion analyst's answer read as the openrouter SDK's FusionAnalysisResult (plugins.routing_plugins.fusion):
its JSON object, repaired when it is not quite JSON, each key in the shape the SDK declares."""

import json

from plugins.healing import repair_bounded

ANALYSIS_KEYS = ("consensus", "contradictions", "partial_coverage", "unique_insights", "blind_spots")


def _strings(value) -> list[str]:
    values = value if isinstance(value, list) else [value] if value else []
    return [v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in values]


def _objects(value) -> list:
    return value if isinstance(value, list) else [value] if value else []


def _contradiction(value) -> dict:
    if not isinstance(value, dict):
        return {"topic": str(value), "stances": []}
    stances = [
        {"model": str(s.get("model") or ""), "stance": str(s.get("stance") or "")}
        for s in _objects(value.get("stances"))
        if isinstance(s, dict)
    ]
    return {"topic": str(value.get("topic") or value.get("point") or ""), "stances": stances}


def _coverage(value) -> dict:
    if not isinstance(value, dict):
        return {"point": str(value), "models": []}
    return {"point": str(value.get("point") or ""), "models": _strings(value.get("models"))}


def _insight(value) -> dict:
    if not isinstance(value, dict):
        return {"insight": str(value), "model": ""}
    return {"insight": str(value.get("insight") or ""), "model": str(value.get("model") or "")}


def analysis_parse(text: str) -> dict | None:
    """The analyst's JSON object in the openrouter SDK's FusionAnalysisResult shape (missing keys as [], a bare
    string where an object belongs made one), None when it sent no object."""
    try:
        value = json.loads(text)
    except ValueError:
        try:  # json-repair is not linear in the worst case: bounded in a child process (plugins.healing)
            value = repair_bounded(text)
        except Exception:  # no JSON found, out of time, or anything else a model's text provokes
            return None
    if not isinstance(value, dict) or not any(key in value for key in ANALYSIS_KEYS):
        return None
    return {
        "consensus": _strings(value.get("consensus")),
        "contradictions": [_contradiction(v) for v in _objects(value.get("contradictions"))],
        "partial_coverage": [_coverage(v) for v in _objects(value.get("partial_coverage"))],
        "unique_insights": [_insight(v) for v in _objects(value.get("unique_insights"))],
        "blind_spots": _strings(value.get("blind_spots")),
    }
