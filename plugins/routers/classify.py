"""The auto-router's task classifier: a catalog model (settings.AUTO_ROUTER_CLASSIFIER_MODEL) called through the
attempt engine and billed, else a local keyword heuristic (microseconds, free). Both answer one of
routing.task_types.TASK_TYPES."""

import re
from dataclasses import dataclass, replace
from decimal import Decimal

from django.conf import settings

from gateway.billing.services import ReservationHandle
from gateway.errors import GatewayError
from routing.attempts import AttemptSequence, AttemptsFailed
from routing.canonical import CanonicalRequest, ImagePart, Message, TextPart
from routing.limits import RoutingLimit
from routing.preferences import Preferences
from routing.pricing import usage_cost
from routing.selection import endpoints_for_request
from routing.side_calls import bound_for, call_hold, call_worst
from routing.stages import RequestContext
from routing.task_types import TASK_TYPES

MAX_CLASSIFIED_CHARS = 4000  # the end of the latest user turn is what is classified (bounded work, bounded cost)
CLASSIFIER_INSTRUCTIONS = (
    "Classify the user's request into exactly one task type. Answer with the task type only, one of: "
    + ", ".join(TASK_TYPES)
    + "."
)

# Keyword patterns per task type (case-insensitive, word-bounded). The type with the most hits wins; ties go to the
# earlier type in this table. Nothing hit: `vision` when the request carries an image, else `general`.
KEYWORDS: dict[str, tuple[str, ...]] = {
    "coding": (
        r"code",
        r"coding",
        r"function",
        r"method",
        r"python",
        r"javascript",
        r"typescript",
        r"java",
        r"golang|go program",
        r"rust",
        r"c\+\+|c#",
        r"ruby",
        r"php",
        r"kotlin|swift",
        r"bash|shell|powershell",
        r"sql",
        r"bug",
        r"debug\w*",
        r"compile\w*",
        r"stack ?trace|traceback",
        r"exception",
        r"segfault|deadlock\w*|race condition",
        r"refactor\w*",
        r"regex",
        r"api",
        r"class",
        r"def",
        r"unit tests?",
        r"implement\w*",
        r"script",
        r"repos?|repository|git|commit",
        r"flask|django|react|node|npm|pip",
        r"loop",
        r"variable",
        r"syntax",
        r"migration",
        r"index on",
        r"programs?",
        r"endpoint",
        r"docker\w*|kubernetes",
        r"one-liner",
        r"\w+\(\w*\)",
        r"\w+\.\w+\(",
    ),
    "math": (
        r"solve",
        r"equation",
        r"integral",
        r"derivative",
        r"prove",
        r"proof",
        r"show that",
        r"theorem",
        r"calculate",
        r"compute",
        r"probability",
        r"matrix",
        r"algebra",
        r"geometry",
        r"irrational",
        r"prime",
        r"percent|%",
        r"find x|solve for",
        r"mph|km/h",
        r"how long|how far",
        r"\d+\s*[-+*/^x]\s*\d+",
        r"\d+\^\w+|\w\^\d+",
        r"square root",
    ),
    "translation": (
        r"translate\w*",
        r"translation",
        r"(?:in|into|to) (?:french|german|spanish|italian|japanese|chinese|korean|portuguese|russian|arabic|dutch"
        r"|english)",
        r"(?:french|german|spanish|italian|japanese|chinese|korean|portuguese|russian|arabic|dutch) (?:word|for)",
        r"how do you say",
    ),
    "summarization": (
        r"summar\w*",
        r"tl;?dr",
        r"key points",
        r"condense",
        r"shorten",
        r"recap",
        r"overview",
        r"boil (?:this|it) down",
        r"gist",
        r"bullet points",
        r"in a nutshell",
        r"main (?:points|ideas)",
    ),
    "extraction": (
        r"extract\w*",
        r"pull out",
        r"parse",
        r"list (?:all|every)",
        r"fields",
        r"entities",
        r"get the \w+'s",
        r"as json",
        r"every (?:date|name|email|number)",
        r"from this (?:resume|invoice|document|email|text|pdf)",
    ),
    "classification": (
        r"classif\w*",
        r"categori[sz]\w*",
        r"label",
        r"tag (?:each|these|this)",
        r"sentiment",
        r"which category",
        r"positive or negative",
        r"spam or not",
        r"is (?:this|it) (?:a|an) \w+ or (?:a|an) ",
    ),
    "vision": (r"image", r"photo", r"picture", r"screenshot", r"diagram", r"attached", r"in the (?:photo|image)"),
    "data_analysis": (
        r"csv",
        r"dataset",
        r"spreadsheet",
        r"pandas",
        r"statistic\w*",
        r"trend",
        r"chart",
        r"average",
        r"table of",
        r"revenue|sales",
        r"year-over-year|growth",
        r"outliers?",
        r"region",
        r"correlat\w*",
    ),
    "writing": (
        r"write",
        r"essay",
        r"poem",
        r"story",
        r"novel|chapter",
        r"blog",
        r"article",
        r"draft",
        r"email",
        r"cover letter",
        r"rewrite",
        r"proofread",
        r"polish",
        r"grammar",
        r"compose",
        r"message for",
        r"word (?:a|my|this)",
        r"linkedin post|tweet",
        r"speech",
        r"slogan|tagline",
    ),
    "roleplay": (
        r"role-?play",
        r"pretend",
        r"you are (?:a|an|my) \w+",
        r"you are [a-z]+ [a-z]+;",
        r"act as",
        r"in character",
        r"talk to me as",
        r"as (?:him|her) ",
        r"scene",
    ),
    "agentic": (
        r"step by step plan",
        r"use the tools?",
        r"browse",
        r"agent",
        r"automate",
        r"workflow",
        r"book (?:me|a)",
        r"add it to",
        r"open a ticket",
        r"search the web",
        r"then (?:open|send|create|add|book)",
        r"calendar",
    ),
    "reasoning": (
        r"why",
        r"explain",
        r"reason\w*",
        r"logic\w*",
        r"puzzle",
        r"riddle",
        r"compare",
        r"trade-?offs?",
        r"pros and cons",
        r"should (?:i|we)",
        r"which of these",
        r"walk me through",
        r"decide",
    ),
    "question_answering": (
        r"what is",
        r"who (?:is|was)",
        r"when (?:did|was|were)",
        r"where (?:is|are|was)",
        r"how many",
        r"capital of",
        r"what year",
    ),
    "chat": (
        r"hello",
        r"hi",
        r"hey",
        r"thanks",
        r"thank you",
        r"how are you",
        r"good (?:morning|evening|night)",
        r"what'?s up",
        r"nice to meet",
    ),
}
# One alternation per type; a type's hits are the distinct keywords found (one pass over the text per type).
_COMPILED = {
    task: re.compile(r"\b(?:" + "|".join(f"({p})" for p in patterns) + r")\b")  # on lower-cased text
    for task, patterns in KEYWORDS.items()
}


@dataclass(frozen=True, slots=True)
class Classified:
    task_type: str
    classifier: str  # "heuristic" or "model:<id>"
    cost_usd: Decimal = Decimal(0)
    note: str = ""  # why the heuristic ran when a classifier model is configured
    holds: tuple[ReservationHandle, ...] = ()  # the classifier call's hold (the request's own takes it over)


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
    text = text.lower()  # faster than IGNORECASE (which defeats the literal-prefix search)
    for task, pattern in _COMPILED.items():
        count = len({match.lastindex for match in pattern.finditer(text)})  # which keywords, not how often
        if count > hits:
            best, hits = task, count
    if best:
        return best
    return "vision" if has_image else "general"


def classifier_model() -> str:
    return str(getattr(settings, "AUTO_ROUTER_CLASSIFIER_MODEL", "") or "")


def classify(
    request: CanonicalRequest,
    *,
    limits: tuple[RoutingLimit, ...],
    prefs: Preferences | None = None,
    ctx: RequestContext | None = None,
) -> Classified:
    """The configured classifier model (billed), else the heuristic; a model that fails or answers something
    that is not a task type falls back to the heuristic, and says so. With `ctx`, the model's call is held first
    (routing.side_calls.call_hold: the credits, the key's limit, the guardrail budgets); refused, the heuristic runs
    (free) and the request's own hold decides."""
    text, has_image = latest_user_text(request)
    model = classifier_model()
    if not model:
        return Classified(task_type=heuristic(text, has_image=has_image), classifier="heuristic")
    holds: tuple[ReservationHandle, ...] = ()
    try:
        # the text goes only where the caller's may: its limits and its request's provider preferences
        plan = endpoints_for_request(models=[model], limits=limits, prefs=prefs)
        probe = CanonicalRequest(
            model="",
            instructions=CLASSIFIER_INSTRUCTIONS,
            input=(Message(role="user", content=(TextPart(text or "(empty)"),)),),
            temperature=0,
            max_output_tokens=16,
        )
        if ctx is not None:
            hold = call_hold(ctx, call_worst(plan, probe), label="auto-router classifier")
            if isinstance(hold, GatewayError):
                note = f"classifier model {model} not run ({hold.message})"
                return Classified(task_type=heuristic(text, has_image=has_image), classifier="heuristic", note=note)
            holds = (hold,)
        served = AttemptSequence(
            candidates=plan.candidates,
            request_for=lambda c: replace(probe, model=c.endpoint.upstream_model),
            bound_usage=bound_for(probe),
        ).call()
    except (GatewayError, AttemptsFailed) as error:
        note = f"classifier model {model} unavailable ({getattr(error, 'message', None) or type(error).__name__})"
        return Classified(
            task_type=heuristic(text, has_image=has_image), classifier="heuristic", note=note, holds=holds
        )
    cost = usage_cost(endpoint=served.candidate.endpoint, usage=served.response.usage)
    said = "".join(getattr(item, "text", "") or "" for item in served.response.output).strip().lower()
    found = next((task for task in TASK_TYPES if re.search(rf"\b{task}\b", said.replace(" ", "_"))), None)
    if found is None:
        note = f"classifier model {model} answered no task type"
        return Classified(
            task_type=heuristic(text, has_image=has_image),
            classifier="heuristic",
            cost_usd=cost,
            note=note,
            holds=holds,
        )
    model_id = served.candidate.endpoint.model_id
    return Classified(task_type=found, classifier=f"model:{model_id}", cost_usd=cost, holds=holds)
