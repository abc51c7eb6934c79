"""The fusion analyst's prompt and answer, and the final answer's writer prompt: the analyst's answer read as the
openrouter SDK's FusionAnalysisResult (its JSON object, repaired when it is not quite JSON, each key in the shape the
SDK declares)."""

import json
from typing import Any

from plugins.common.repair import repair_bounded
from plugins.fusion.panel import DEFAULT_OUTPUT_TOKENS, PanelAnswer
from routing.canonical import CanonicalRequest, Message, TextPart
from routing.side_calls import (
    CHARS_PER_TOKEN,
    sent_tokens,
)

ANALYSIS_KEYS = ("consensus", "contradictions", "partial_coverage", "unique_insights", "blind_spots")
MAX_ANSWER_CHARS = 20_000  # of each panel answer, in the analyst's and the writer's prompt
# And at most this many characters per output token the call may bill (its text is cut there): an honest answer
# has 3-5 a token, and the final answer's hold, taken before the panel runs, counts the writer's prompt at this.
ANSWER_CHARS_PER_TOKEN = 8
NO_ANALYSIS = "(no analysis available)"
ANSWER_HEADER_TOKENS = 32  # a panel answer's header in the analyst's prompt ("--- Panelist 2 (model) ---")
ANALYST_INSTRUCTIONS = (
    "You are the analyst of a panel of models that answered the same request. Compare their answers and reply "
    "with one JSON object only, with these keys: "
    '"consensus": [strings: what the answers agree on], '
    '"contradictions": [{"topic": string, "stances": [{"model": panelist model, "stance": string}]}], '
    '"partial_coverage": [{"point": string, "models": [the panelist models that cover it]}], '
    '"unique_insights": [{"model": panelist model, "insight": string}] (valuable points one answer alone makes), '
    '"blind_spots": [strings: what every answer missed].'
)
WRITER_INSTRUCTIONS = (
    "A panel of models answered this request; their answers and an analyst's comparison follow. Write the best "
    "final answer to the request: keep the consensus, resolve the contradictions, add the unique insights, cover "
    "the blind spots. Do not mention the panel."
)


def _strings(value: Any) -> list[str]:
    values = value if isinstance(value, list) else [value] if value else []
    return [v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in values]


def _objects(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value] if value else []


def _contradiction(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        return {"topic": str(value), "stances": []}
    stances = [
        {"model": str(s.get("model") or ""), "stance": str(s.get("stance") or "")}
        for s in _objects(value.get("stances"))
        if isinstance(s, dict)
    ]
    return {"topic": str(value.get("topic") or value.get("point") or ""), "stances": stances}


def _coverage(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        return {"point": str(value), "models": []}
    return {"point": str(value.get("point") or ""), "models": _strings(value.get("models"))}


def _insight(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        return {"insight": str(value), "model": ""}
    return {"insight": str(value.get("insight") or ""), "model": str(value.get("model") or "")}


def analysis_parse(text: str) -> dict[str, Any] | None:
    """The analyst's JSON object in the openrouter SDK's FusionAnalysisResult shape (missing keys as [], a bare
    string where an object belongs made one), None when it sent no object."""
    try:
        value = json.loads(text)
    except ValueError:
        try:  # json-repair is not linear in the worst case: bounded in a child process (plugins.common.repair)
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


def analysis_request(request: CanonicalRequest, served: list[PanelAnswer]) -> CanonicalRequest:
    return CanonicalRequest(
        model="",
        instructions=ANALYST_INSTRUCTIONS,
        input=(
            Message(
                role="user",
                content=(
                    TextPart(f"Request:\n{question_text(request)}\n\nAnswers:\n{answers_block(served, request)}"),
                ),
            ),
        ),
        text_format={"type": "json_object"},
        temperature=0,
        max_output_tokens=request.max_output_tokens or DEFAULT_OUTPUT_TOKENS,
    )


def analysis_input(request: CanonicalRequest, members: int) -> int:
    """The analyst's input bound: its instructions and the question, and each member's answer at most what the
    member may bill as output (and at most MAX_ANSWER_CHARS), with its header."""
    answer = min(request.max_output_tokens or DEFAULT_OUTPUT_TOKENS, MAX_ANSWER_CHARS // CHARS_PER_TOKEN)
    return sent_tokens(analysis_request(request, [])) + members * (answer + ANSWER_HEADER_TOKENS)


def question_text(request: CanonicalRequest) -> str:
    texts = []
    for item in request.input:
        if isinstance(item, Message):
            body = "\n".join(p.text for p in item.content if isinstance(p, TextPart))
            texts.append(f"[{item.role}] {body}")
    return "\n\n".join(texts)[-MAX_ANSWER_CHARS:]


def shown_chars(request: CanonicalRequest) -> int:
    """The most characters of a panel answer (or of the analysis) the analyst and the writer read."""
    return min(MAX_ANSWER_CHARS, (request.max_output_tokens or DEFAULT_OUTPUT_TOKENS) * ANSWER_CHARS_PER_TOKEN)


def answers_block(answers: list[PanelAnswer], request: CanonicalRequest) -> str:
    shown = shown_chars(request)
    return "\n\n".join(
        f"--- Panelist {index} ({a.model}) ---\n{a.text[:shown]}" for index, a in enumerate(answers, start=1)
    )


def writer_instructions(request: CanonicalRequest, served: list[PanelAnswer], analysis: dict[str, Any] | None) -> str:
    """The final answer's instructions: the request's, then the panel answers and the analysis for the writer."""
    analysis_text = (
        json.dumps(analysis, ensure_ascii=False)[: shown_chars(request)] if analysis is not None else NO_ANALYSIS
    )
    return (f"{request.instructions}\n\n" if request.instructions else "") + (
        f"{WRITER_INSTRUCTIONS}\n\nPanel answers:\n{answers_block(served, request)}\n\n"
        f"Analysis (JSON):\n{analysis_text}"
    )
