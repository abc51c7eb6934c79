"""POST /embeddings on the pipeline's steps: normalize (each input a user message, so guardrails read it) ->
the guardrail pre-stages -> plan over embedding endpoints -> hold -> attempts (routing's one fallback loop,
`AttemptSequence.embed`) -> settle + record (billed per input token) -> render the OpenAI list."""

import base64
import struct
from dataclasses import replace

from gateway.errors import GatewayError
from responses_api import pipeline, stages
from responses_api.metadata import requested_models
from responses_api.normalize import CHARS_PER_TOKEN, Prepared, safety_hash
from responses_api.run import ResponseRun
from responses_api.service import error_metadata, response_charge_checks, response_hold, response_plan
from routing.attempts import AttemptSequence, AttemptsFailed
from routing.canonical import CanonicalRequest, Message, TextPart, Usage
from routing.models import ModelKind
from routing.preferences import split_model_suffix
from routing.providers.embeddings import EmbeddingRequest, EmbeddingResponse
from routing.providers.registry import adapter_for
from routing.selection import Candidate, RoutePlan, unservable
from routing.selectors import endpoints_for_model
from routing.stages import RequestContext

MSG_NOT_EMBEDDING = "{model} is not an embedding model: use /chat/completions, /messages or /responses"
MSG_CHAT_ONLY = "{model} is an embedding model: use /embeddings"
MSG_NO_ADAPTER = "No endpoint of {models} can serve embeddings on this gateway: retrying does not help"
MSG_TOKENS_UNCHECKED = (
    "input[{index}]: token arrays cannot be checked by the guardrails that apply to this key; send the text"
)
MSG_DIMENSIONS = "The provider returned {got} dimensions, not the {wanted} asked for"
USAGE_INPUT_FACTOR, USAGE_INPUT_SLACK = 8, 4096  # as routing.pricing_usage: a plausible reported count


def refuse_embedding_models(data: dict) -> None:
    """For the chat front doors: a requested model of kind embedding is a 400 naming the right endpoint."""
    for model in requested_models(data)[1]:
        if any(endpoint.model_kind == ModelKind.EMBEDDING for endpoint in endpoints_for_model(model_id=model)):
            raise GatewayError(MSG_CHAT_ONLY.format(model=model), status=400, metadata={"param": "model"})


def _estimate(value: str | tuple[int, ...]) -> int:
    return len(value) if isinstance(value, tuple) else len(value) // CHARS_PER_TOKEN + 1


def embeddings_normalize(*, ctx: RequestContext, data: dict) -> Prepared:
    requested = ([data["model"]] if data.get("model") else []) + [
        m for m in data.get("models") or [] if m != data.get("model")
    ]
    split = [split_model_suffix(model) for model in requested]
    items = tuple(
        Message(role="user", content=(TextPart(text=value if isinstance(value, str) else ""),))
        for value in data["input"]
    )
    canonical = CanonicalRequest(
        model="",
        input=items,
        safety_identifier=safety_hash(account_id=str(ctx.caller.account_id), value=data.get("user")),
    )
    return Prepared(
        models=list(dict.fromkeys(base for base, _ in split)),
        canonical=canonical,
        data=data,
        estimated_input_tokens=sum(_estimate(value) for value in data["input"]),
        suffix=split[0][1],
        used_params=frozenset({"dimensions"} if data.get("dimensions") else ()),
    )


def _inputs_after_stages(prepared: Prepared, ran: list) -> tuple[str | tuple[int, ...], ...]:
    """The inputs as the guardrails left them (a redaction changes a text); token arrays only when no guardrail
    with content filters applied (`engines`: what read the text), as they cannot be read."""
    scanned = any(entry.data.get("engines") for entry in ran)
    inputs: list[str | tuple[int, ...]] = []
    for index, (value, item) in enumerate(zip(prepared.data["input"], prepared.canonical.input, strict=True)):
        if isinstance(value, tuple):
            if scanned:
                raise GatewayError(MSG_TOKENS_UNCHECKED.format(index=index), status=400, metadata={"param": "input"})
            inputs.append(value)
        else:
            assert isinstance(item, Message)
            inputs.append("".join(part.text for part in item.content if isinstance(part, TextPart)))
    return tuple(inputs)


def _embedding_plan(plan: RoutePlan) -> RoutePlan:
    """The plan's candidates that can serve embeddings; a requested model of another kind is a 400."""
    kinds = {endpoint.model_id: endpoint.model_kind for endpoint in plan.available}
    for model in plan.models:
        if kinds.get(model, ModelKind.EMBEDDING) != ModelKind.EMBEDDING:
            raise GatewayError(MSG_NOT_EMBEDDING.format(model=model), status=400, metadata={"param": "model"})
    candidates = tuple(c for c in plan.candidates if adapter_for(c.endpoint.adapter).supports_embeddings)
    if not candidates:
        # no adapter of its providers speaks embeddings: a fact of the catalog, not an outage
        raise unservable(MSG_NO_ADAPTER.format(models=", ".join(plan.models)), models=list(plan.models))
    return replace(plan, candidates=candidates)


def embeddings_prepare_run(*, ctx: RequestContext, data: dict) -> tuple[ResponseRun, tuple]:
    """normalize -> the guardrail pre-stages -> plan (by the longest input: context is per input) -> hold."""
    with error_metadata(ctx=ctx, data=data) as planned:
        prepared = embeddings_normalize(ctx=ctx, data=data)
        ctx = replace(ctx, models=tuple(prepared.models))
        guardrails = [stage for stage in stages.PRE_STAGES if stage.type == "guardrail"]
        prepared, ran = pipeline.pre_stages(prepared, ctx, guardrails)
        inputs = _inputs_after_stages(prepared, ran)
        ctx = replace(ctx, request=prepared.canonical)
        longest = max(_estimate(value) for value in inputs)
        try:
            plan = _embedding_plan(response_plan(ctx=ctx, prepared=replace(prepared, estimated_input_tokens=longest)))
            planned.append(plan)
            run = response_hold(ctx=ctx, prepared=prepared, plan=plan)  # it takes over the guardrails' holds
        except BaseException:  # refused: the entity model's call (if it ran) is charged out of its hold
            response_charge_checks(ctx=ctx, prepared=prepared, cost=prepared.stage_cost)
            raise
    run.pipeline += ran
    return run, inputs


def _bounded(run: ResponseRun, usage: Usage) -> Usage:
    """The reported input tokens while plausible; else (or unreported) the estimate, the anomaly recorded."""
    estimate = run.prepared.estimated_input_tokens
    reported = usage.input_tokens
    if 0 < reported <= estimate * USAGE_INPUT_FACTOR + USAGE_INPUT_SLACK:
        return Usage(input_tokens=reported)
    run.usage_anomaly = {"reported": {"input_tokens": reported}, "reasons": ["input_tokens not plausible"]}
    return Usage(input_tokens=estimate)


def embeddings_call(run: ResponseRun, inputs: tuple) -> tuple[Candidate, EmbeddingResponse, Usage]:
    """attempts -> settle + record; errors are HTTP errors (the hold given back)."""
    data = run.prepared.data

    def request_for(candidate: Candidate) -> EmbeddingRequest:
        return EmbeddingRequest(
            model=candidate.endpoint.upstream_model,
            input=inputs,
            dimensions=data.get("dimensions"),
            user=run.prepared.canonical.safety_identifier,
        )

    run.sequence = AttemptSequence(
        candidates=run.plan.candidates,
        request_for=request_for,
        sticky_key=run.sticky_key if run.ctx.session_id else "",
    )
    try:
        embedded = run.sequence.embed(expected=len(inputs))
    except AttemptsFailed as failed:
        raise run.fail(failed.error) from None
    usage = _bounded(run, embedded.response.usage)
    run.close(status="completed", served=embedded.candidate, usage=usage, finish_reason="stop")
    wanted = data.get("dimensions")
    got = len(embedded.response.vectors[0])
    if wanted and got != wanted:  # billed: the provider computed them, but the caller cannot use them
        raise GatewayError(MSG_DIMENSIONS.format(got=got, wanted=wanted), status=502)
    return embedded.candidate, embedded.response, usage


def encoded(vector: tuple[float, ...], encoding_format: str) -> list[float] | str:
    """`float`: the numbers; `base64`: little-endian float32, as OpenAI sends them."""
    if encoding_format == "base64":
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
    return list(vector)


def embeddings_result(run: ResponseRun, served: Candidate, response: EmbeddingResponse, usage: Usage) -> dict:
    assert run.settled is not None
    encoding = run.prepared.data.get("encoding_format") or "float"
    body = {
        "object": "list",
        "id": run.generation_id,
        "model": served.endpoint.model_id,
        "data": [
            {"object": "embedding", "index": index, "embedding": encoded(vector, encoding)}
            for index, vector in enumerate(response.vectors)
        ],
        "usage": {
            "prompt_tokens": usage.input_tokens,
            "total_tokens": usage.input_tokens,
            "cost": float(run.settled.charged),
            "is_byok": served.is_byok,
        },
    }
    metadata = run.metadata()
    if metadata is not None:
        body["gateway_metadata"] = metadata
    return body
