"""The auto-router's task classifier: a catalog model (settings.AUTO_ROUTER_CLASSIFIER_MODEL) called through the
attempt engine and billed, else a local keyword heuristic (microseconds, free). Both answer one of
routing.models.TASK_TYPES."""

import re
from dataclasses import dataclass, replace
from decimal import Decimal

from django.conf import settings

from gateway.errors import GatewayError
from routing.attempts import AttemptSequence, AttemptsFailed
from routing.canonical import CanonicalRequest, ImagePart, Message, TextPart
from routing.limits import RoutingLimit
from routing.models import TASK_TYPES
from routing.pricing import usage_cost
from routing.selection import endpoints_for_request

MAX_CLASSIFIED_CHARS = 4000  # the end of the latest user turn is what is classified (bounded work, bounded cost)
CLASSIFIER_INSTRUCTIONS = (
    "Classify the user's request into exactly one task type. Answer with the task type only, one of: "
    + ", ".join(TASK_TYPES)
    + "."
)

# Keyword patterns per task type (case-insensitive, word-bounded). The type with the most hits wins; ties go to the
# earlier type in this table. Nothing hit: `chat` for a short message, else `general`.
KEYWORDS: dict[str, tuple[str, ...]] = {
    "coding": (
        r"code",
        r"function",
        r"python",
        r"javascript",
        r"typescript",
        r"java",
        r"rust",
        r"sql",
        r"bug",
        r"debug",
        r"compile\w*",
        r"stack ?trace",
        r"exception",
        r"refactor\w*",
        r"regex",
        r"api",
        r"class",
        r"def",
        r"unit tests?",
        r"implement\w*",
        r"script",
    ),
    "math": (
        r"solve",
        r"equation",
        r"integral",
        r"derivative",
        r"prove",
        r"theorem",
        r"calculate",
        r"probability",
        r"matrix",
        r"algebra",
        r"geometry",
        r"\d+\s*[-+*/^]\s*\d+",
    ),
    "translation": (r"translate\w*", r"translation", r"in (?:french|german|spanish|italian|japanese|chinese)"),
    "summarization": (r"summari[sz]\w*", r"tl;?dr", r"key points", r"condense", r"shorten", r"recap"),
    "extraction": (r"extract\w*", r"pull out", r"parse", r"list (?:all|every)", r"fields", r"entities"),
    "classification": (r"classif\w*", r"categori[sz]\w*", r"label", r"sentiment", r"which category"),
    "data_analysis": (r"csv", r"dataset", r"spreadsheet", r"pandas", r"statistic\w*", r"trend", r"chart", r"average"),
    "writing": (
        r"write",
        r"essay",
        r"poem",
        r"story",
        r"blog",
        r"article",
        r"draft",
        r"email",
        r"cover letter",
        r"rewrite",
        r"proofread",
    ),
    "roleplay": (r"role-?play", r"pretend", r"you are a", r"act as", r"in character"),
    "agentic": (r"step by step plan", r"use the tools?", r"browse", r"agent", r"automate", r"workflow"),
    "reasoning": (r"why", r"explain", r"reason\w*", r"logic\w*", r"puzzle", r"riddle", r"compare", r"trade-?offs?"),
    "question_answering": (r"what is", r"who (?:is|was)", r"when did", r"where is", r"how many", r"capital of"),
    "chat": (r"hello", r"hi", r"hey", r"thanks", r"thank you", r"how are you", r"good morning"),
}
# One alternation per type; a type's hits are the distinct keywords found (one pass over the text per type).
_COMPILED = {
    task: re.compile(r"\b(?:" + "|".join(f"({p})" for p in patterns) + r")\b", re.IGNORECASE)
    for task, patterns in KEYWORDS.items()
}
CHAT_MAX_CHARS = 80


@dataclass(frozen=True, slots=True)
class Classified:
    task_type: str
    classifier: str  # "heuristic" or "model:<id>"
    cost_usd: Decimal = Decimal(0)
    note: str = ""  # why the heuristic ran when a classifier model is configured


def latest_user_text(request: CanonicalRequest) -> tuple[str, bool]:
    """The latest user turn's text (its end, bounded) and whether the request carries an image."""
    has_image = False
    text = ""
    for item in request.input:
        if isinstance(item, Message):
            has_image = has_image or any(isinstance(part, ImagePart) for part in item.content)
            if item.role == "user":
                text = "\n".join(part.text for part in item.content if isinstance(part, TextPart))
    return text[-MAX_CLASSIFIED_CHARS:], has_image


def heuristic(text: str, *, has_image: bool = False) -> str:
    """The task type by keyword hits (see KEYWORDS)."""
    best, hits = "", 0
    for task, pattern in _COMPILED.items():
        count = len({match.lastindex for match in pattern.finditer(text)})  # which keywords, not how often
        if count > hits:
            best, hits = task, count
    if best:
        return best
    if has_image:
        return "vision"
    return "chat" if len(text.strip()) <= CHAT_MAX_CHARS else "general"


def classifier_model() -> str:
    return str(getattr(settings, "AUTO_ROUTER_CLASSIFIER_MODEL", "") or "")


def classify(request: CanonicalRequest, *, limits: tuple[RoutingLimit, ...]) -> Classified:
    """The configured classifier model (billed), else the heuristic; a model that fails or answers something
    that is not a task type falls back to the heuristic, and says so."""
    text, has_image = latest_user_text(request)
    model = classifier_model()
    if not model:
        return Classified(task_type=heuristic(text, has_image=has_image), classifier="heuristic")
    try:
        plan = endpoints_for_request(models=[model], limits=limits)  # the text goes only where the caller's may
        probe = CanonicalRequest(
            model="",
            instructions=CLASSIFIER_INSTRUCTIONS,
            input=(Message(role="user", content=(TextPart(text or "(empty)"),)),),
            temperature=0,
            max_output_tokens=16,
        )
        served = AttemptSequence(
            candidates=plan.candidates, request_for=lambda c: replace(probe, model=c.endpoint.upstream_model)
        ).call()
    except (GatewayError, AttemptsFailed) as error:
        note = f"classifier model {model} unavailable ({getattr(error, 'message', None) or type(error).__name__})"
        return Classified(task_type=heuristic(text, has_image=has_image), classifier="heuristic", note=note)
    cost = usage_cost(endpoint=served.candidate.endpoint, usage=served.response.usage)
    said = "".join(getattr(item, "text", "") or "" for item in served.response.output).strip().lower()
    found = next((task for task in TASK_TYPES if re.search(rf"\b{task}\b", said.replace(" ", "_"))), None)
    if found is None:
        note = f"classifier model {model} answered no task type"
        return Classified(
            task_type=heuristic(text, has_image=has_image), classifier="heuristic", cost_usd=cost, note=note
        )
    return Classified(task_type=found, classifier=f"model:{served.candidate.endpoint.model_id}", cost_usd=cost)
