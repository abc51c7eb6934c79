"""The moderation engines: the catalog model named in settings.MODERATION_MODEL, called the way
settings.MODERATION_ENGINE says, through routing's attempt engine (fallback over its endpoints, health,
credentials of the operator or the caller's BYOK keys, outbound rules of routing.http).

- `openai-moderations`: `POST <provider base URL>/moderations` of an OpenAI-compatible provider
  (https://platform.openai.com/docs/api-reference/moderations/create): one result per input text; a text is
  flagged with the categories set to true.
- `llama-guard`: a guard model over the provider's own wire format (any Chat Completions provider serving
  Llama Guard): the text is the user turn; the model answers `safe`, or `unsafe` and a line of hazard codes
  (https://www.llama.com/docs/model-cards-and-prompt-formats/llama-guard-4/).

An engine that cannot give a verdict raises EngineUnavailable: the request is not sent unmoderated."""

from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from django.conf import settings

from gateway.errors import GatewayError
from routing import http, jsonsafe, upstream
from routing.attempts import AttemptSequence, AttemptsFailed
from routing.canonical import CanonicalRequest, Message, TextPart, Usage
from routing.errors import ErrorType, UpstreamError
from routing.limits import RoutingLimit
from routing.pricing import usage_cost
from routing.providers.base import UpstreamRequest
from routing.providers.registry import adapter_for
from routing.redact import scrub_error
from routing.selection import Candidate, RoutePlan, endpoints_for_request
from routing.side_calls import bound_for, call_worst

OPENAI_MODERATIONS, LLAMA_GUARD = "openai-moderations", "llama-guard"
CHUNK_CHARS = 10_000  # one /moderations input string at most (a longer text goes as overlapping pieces)
CHUNK_OVERLAP = 200  # so that a phrase on a boundary is whole in one piece
TIMEOUT_SECONDS = 30.0  # the whole /moderations call
CHAT_PATHS = ("/chat/completions", "/responses")  # the OpenAI-compatible adapters' paths, beside /moderations
# Llama Guard 3/4 hazard categories (the MLCommons taxonomy).
GUARD_HAZARDS = {
    "S1": "violent crimes",
    "S2": "non-violent crimes",
    "S3": "sex-related crimes",
    "S4": "child sexual exploitation",
    "S5": "defamation",
    "S6": "specialized advice",
    "S7": "privacy",
    "S8": "intellectual property",
    "S9": "indiscriminate weapons",
    "S10": "hate",
    "S11": "suicide & self-harm",
    "S12": "sexual content",
    "S13": "elections",
    "S14": "code interpreter abuse",
}


class EngineUnavailable(Exception):
    """The engine gave no verdict (misconfigured, unreachable, or an answer it could not read)."""


class EngineNotServed(EngineUnavailable):
    """The engine cannot run on this deployment (an unknown kind, a model it does not serve): a fact of its
    configuration, which a retry cannot change."""


@dataclass(frozen=True, slots=True)
class Verdict:
    flagged: bool
    reasons: tuple[str, ...]
    flagged_text: str  # the text the engine flagged ("" when it passed)
    provider_slug: str
    provider_name: str
    model_slug: str
    cost_usd: Decimal


@dataclass(frozen=True, slots=True)
class EngineConfig:
    model: str
    kind: str


def engine_config() -> EngineConfig | None:
    """The operator's engine, or None when none is configured."""
    model = str(getattr(settings, "MODERATION_MODEL", "") or "")
    if not model:
        return None
    return EngineConfig(model=model, kind=str(getattr(settings, "MODERATION_ENGINE", "") or OPENAI_MODERATIONS))


def moderate(config: EngineConfig, texts: list[str], limits: tuple[RoutingLimit, ...]) -> Verdict:
    check = ENGINES.get(config.kind)
    if check is None:
        raise EngineNotServed(f"MODERATION_ENGINE {config.kind!r} is not one of {sorted(ENGINES)}")
    return check(config.model, texts, _plan(config.model, limits))


def moderation_worst(config: EngineConfig, texts: list[str], limits: tuple[RoutingLimit, ...]) -> Decimal:
    """The most the engine's call for `texts` can cost (its hold: routing.side_calls.call_hold), billed as `moderate`
    bills it: the moderations API at its input estimate, a guard model at most what was sent and its output limit.
    Raises as `moderate` does when the engine has no endpoint."""
    plan = _plan(config.model, limits)
    if config.kind == LLAMA_GUARD:
        return call_worst(plan, _guard_probe(texts))
    usage = _moderations_usage(texts)
    return max((usage_cost(endpoint=c.endpoint, usage=usage) for c in plan.candidates), default=Decimal(0))


def _plan(model: str, limits: tuple[RoutingLimit, ...]) -> RoutePlan:
    """The engine's endpoints, within the caller's guardrail limits (the text goes only where the caller's may)."""
    try:
        return endpoints_for_request(models=[model], limits=limits)
    except GatewayError as error:
        if error.status == 403:  # the caller's guardrails allow the engine no endpoint: they say so
            raise
        raise EngineNotServed(f"{model}: {error.message}") from None


# ---- OpenAI-compatible /moderations ----------------------------------------------------------------------


class _ModerationCalls(AttemptSequence):
    """The attempt engine's loop (credentials, fallback, health, records) around a `/moderations` call instead of
    a generation: `_attempt` builds each candidate's upstream request, whose URL and credential headers the call
    reuses."""

    def post(self, send: Callable[[Candidate, UpstreamRequest], dict[str, Any]]) -> tuple[Candidate, dict[str, Any]]:
        candidate, _, answer, started, _ = self._attempt(send)
        self.record(candidate, started, None)
        self.served = candidate
        return candidate, answer


def _pieces(text: str) -> list[str]:
    if len(text) <= CHUNK_CHARS:
        return [text]
    step = CHUNK_CHARS - CHUNK_OVERLAP
    return [text[start : start + CHUNK_CHARS] for start in range(0, len(text) - CHUNK_OVERLAP, step)]


def _moderations_url(built: UpstreamRequest) -> str:
    for path in CHAT_PATHS:
        if built.url.endswith(path):
            return built.url[: -len(path)] + "/moderations"
    raise UpstreamError(
        error_type=ErrorType.INVALID_REQUEST, message="This provider has no /moderations endpoint", retryable=True
    )


def _post_moderations(candidate: Candidate, built: UpstreamRequest, payload: dict[str, Any]) -> dict[str, Any]:
    """One `/moderations` call with the credentials the adapter put on `built`; an UpstreamError (scrubbed of
    them) moves the attempt engine on."""
    secrets = upstream.attempt_secrets(built)
    endpoint = candidate.endpoint
    try:
        url = _moderations_url(built)
        response = http.request(
            "POST",
            url,
            headers=built.headers,
            json_body={**payload, "model": endpoint.upstream_model},
            timeouts=http.Timeouts(
                connect=settings.UPSTREAM_CONNECT_TIMEOUT, read=settings.UPSTREAM_READ_TIMEOUT, total=TIMEOUT_SECONDS
            ),
            allow_private=endpoint.allow_private_network and not built.customer_url,
        )
    except http.TransportError as exc:
        raise scrub_error(upstream.transport_error(exc), secrets) from exc
    except UpstreamError as error:
        raise scrub_error(error, secrets) from None
    try:
        if not 200 <= response.status_code < 300:
            raise scrub_error(
                adapter_for(endpoint.adapter).map_error(response.status_code, response.content, response.headers),
                secrets,
            )
        body = jsonsafe.loads(response.content)
    except ValueError:
        raise UpstreamError(
            error_type=ErrorType.PROVIDER_UNAVAILABLE, message="The moderation answer was unreadable", retryable=True
        ) from None
    finally:
        http.close(response)
    return body if isinstance(body, dict) else {}


def _results(answer: dict[str, Any], count: int) -> list[dict[str, Any]]:
    results = answer.get("results")
    if (
        not isinstance(results, list)
        or len(results) != count
        or not all(isinstance(r, dict) and isinstance(r.get("flagged"), bool) for r in results)
    ):
        raise UpstreamError(
            error_type=ErrorType.PROVIDER_UNAVAILABLE, message="The moderation answer had no results", retryable=True
        )
    return results


def openai_moderations(model: str, texts: list[str], plan: RoutePlan) -> Verdict:
    pieces = [(text, piece) for text in texts for piece in _pieces(text)]
    sequence = _ModerationCalls(
        candidates=plan.candidates,
        request_for=lambda candidate: CanonicalRequest(model=candidate.endpoint.upstream_model, input=()),
    )
    payload = {"input": [piece for _, piece in pieces]}

    def send(candidate: Candidate, built: UpstreamRequest) -> dict[str, Any]:
        return {"results": _results(_post_moderations(candidate, built, payload), len(pieces))}

    try:
        candidate, answer = sequence.post(send)
    except AttemptsFailed as failed:
        raise EngineUnavailable(failed.error.message if failed.error else "no endpoint left to try") from None
    endpoint = candidate.endpoint
    flagged = [(text, result) for (text, _), result in zip(pieces, answer["results"], strict=True) if result["flagged"]]
    reasons = tuple(
        dict.fromkeys(
            str(name) for _, result in flagged for name, hit in (result.get("categories") or {}).items() if hit is True
        )
    )
    usage = _moderations_usage(texts)
    return Verdict(
        flagged=bool(flagged),
        reasons=reasons or (("flagged",) if flagged else ()),
        flagged_text=flagged[0][0] if flagged else "",
        provider_slug=endpoint.provider_slug,
        provider_name=endpoint.provider_name,
        model_slug=endpoint.model_id,
        cost_usd=usage_cost(endpoint=endpoint, usage=usage),
    )


# ---- a guard model (Llama Guard) over Chat Completions ---------------------------------------------------


def guard_verdict(said: str) -> tuple[bool, tuple[str, ...]]:
    """(flagged, reasons) from a Llama Guard answer; ValueError when it is neither `safe` nor `unsafe`."""
    lines = [line.strip() for line in said.strip().splitlines() if line.strip()]
    first = lines[0].lower() if lines else ""
    if first == "safe":
        return False, ()
    if first != "unsafe":
        raise ValueError("not a guard verdict")
    codes = [code.strip().upper() for line in lines[1:] for code in line.split(",") if code.strip()]
    reasons = tuple(
        dict.fromkeys(f"{code}: {GUARD_HAZARDS[code]}" if code in GUARD_HAZARDS else code for code in codes)
    )
    return True, reasons or ("unsafe",)


def _moderations_usage(texts: list[str]) -> Usage:
    return Usage(input_tokens=sum(len(text) for text in texts) // 4)  # the API reports no usage


def _guard_probe(texts: list[str]) -> CanonicalRequest:
    joined = "\n\n".join(texts)
    return CanonicalRequest(
        model="", input=(Message(role="user", content=(TextPart(joined),)),), temperature=0, max_output_tokens=64
    )


def llama_guard(model: str, texts: list[str], plan: RoutePlan) -> Verdict:
    probe = _guard_probe(texts)
    joined = "\n\n".join(texts)
    sequence = AttemptSequence(
        candidates=plan.candidates,
        request_for=lambda candidate: replace(probe, model=candidate.endpoint.upstream_model),
        bound_usage=bound_for(probe),
    )
    try:
        served = sequence.call()
        said = "".join(getattr(item, "text", "") or "" for item in served.response.output)
        flagged, reasons = guard_verdict(said)
    except AttemptsFailed as failed:
        raise EngineUnavailable(failed.error.message if failed.error else "no endpoint left to try") from None
    except ValueError:
        raise EngineUnavailable(f"{model} answered neither 'safe' nor 'unsafe'") from None
    endpoint = served.candidate.endpoint
    return Verdict(
        flagged=flagged,
        reasons=reasons,
        flagged_text=joined if flagged else "",
        provider_slug=endpoint.provider_slug,
        provider_name=endpoint.provider_name,
        model_slug=endpoint.model_id,
        cost_usd=usage_cost(endpoint=endpoint, usage=served.response.usage),
    )


ENGINES: dict[str, Callable[[str, list[str], RoutePlan], Verdict]] = {
    OPENAI_MODERATIONS: openai_moderations,
    LLAMA_GUARD: llama_guard,
}
