"""The `moderation` plugin: before routing, the input's text goes to the operator's moderation engine
(plugins.moderation.engines: settings.MODERATION_MODEL and MODERATION_ENGINE), on JSON and stream requests
alike (a stream is refused before it starts).

- Flagged: 403, `error.metadata` = `{reasons, flagged_input (at most 100 characters, middle-truncated with
  "..."), provider_name, model_slug}`.
- No engine configured: 400 saying so (a caller asking for moderation never gets an unmoderated pass).
- The engine unreachable or unreadable: 503; the request is not sent unmoderated.
- Read: the instructions, every text part of every input message and every tool output (the caller's words and
  what tools brought in); images and files are not read as text. At most MAX_TEXT_CHARS characters: a longer
  input is refused (413) rather than moderated in part.
The pipeline entry names the engine and its latency (also `moderation_latency` on the generation record) and
what the engine's call cost, charged with the request. The call is held before it runs (routing.side_calls.call_hold:
the credits, the key's limit and the guardrail budgets; refused: 402 / 403, the engine never called)."""

import time
from decimal import Decimal

from gateway.billing.services import ReservationHandle, hold_drop
from gateway.errors import GatewayError
from plugins.common.config import plugin_settings
from plugins.moderation.engines import (
    EngineNotServed,
    EngineUnavailable,
    Verdict,
    engine_config,
    moderate,
    moderation_worst,
)
from routing.canonical import CanonicalRequest, FunctionCallOutput, Message, TextPart
from routing.errors import ErrorType
from routing.limits import limits_for
from routing.selection import unservable
from routing.side_calls import call_hold
from routing.stages import Block, RequestContext, Staged, StageEntry

PLUGIN_ID = "moderation"
MAX_TEXT_CHARS = 200_000
FLAGGED_INPUT_CHARS = 100
MSG_NOT_CONFIGURED = (
    "The moderation plugin has no moderation engine configured on this gateway (the operator sets "
    "MODERATION_MODEL); the request was not sent. Remove the plugin or ask the operator to configure one"
)
MSG_UNAVAILABLE = "The moderation engine could not check the input ({reason}); the request was not sent unmoderated"
MSG_NOT_SERVED = (
    "The moderation engine cannot run on this gateway ({reason}); the request was not sent unmoderated, and "
    "retrying does not help"
)
MSG_TOO_LONG = "Moderation reads at most {limit} characters of text and this request has more"
MSG_FLAGGED = "Input flagged by moderation ({reasons}); the request was not sent"


class ModerationStage:
    type = "request_plugin"
    name = PLUGIN_ID
    plugin_ids: tuple[str, ...] = (PLUGIN_ID,)

    def wants(self, ctx: RequestContext) -> bool:
        return False

    def __call__(self, request: CanonicalRequest, ctx: RequestContext) -> Staged | Block:
        if plugin_settings(ctx, PLUGIN_ID) is None:
            return Staged(request=request)  # no entry: the stage did not run
        config = engine_config()
        if config is None:
            return Block(MSG_NOT_CONFIGURED, status=400)
        texts = input_texts(request)
        if sum(map(len, texts)) > MAX_TEXT_CHARS:  # a Block: what the stages before it spent (OCR) is charged
            return Block(MSG_TOO_LONG.format(limit=MAX_TEXT_CHARS), status=413)
        if not texts:
            entry = StageEntry(type=self.type, name=self.name, outcome="passed", data={"engine": config.kind})
            return Staged(request=request, entries=(entry,))
        started = time.monotonic()
        holds: tuple[ReservationHandle, ...] = ()
        try:
            # the engine's call is held first (credits, key limit, budgets): one they cannot cover never runs
            hold = call_hold(ctx, moderation_worst(config, texts, limits_for(ctx.caller)), label="moderation")
            if isinstance(hold, GatewayError):
                return Block(hold.message, status=hold.status, metadata=hold.metadata or None)
            holds = (hold,)
            verdict = moderate(config, texts, limits_for(ctx.caller))
        except EngineNotServed as unserved:  # the deployment's configuration: 404, not a 503 the SDKs retry
            refused = unservable(MSG_NOT_SERVED.format(reason=unserved), models=[config.model])
            return Block(refused.message, status=refused.status, metadata=refused.metadata, holds=holds)
        except EngineUnavailable as unavailable:
            return Block(
                MSG_UNAVAILABLE.format(reason=unavailable),
                status=503,
                error_type=ErrorType.PROVIDER_UNAVAILABLE,
                holds=holds,
            )
        except GatewayError as error:  # the caller's guardrails allow the engine no endpoint (403): a Block, so
            # earlier costs count
            return Block(error.message, status=error.status, metadata=error.metadata or None, holds=holds)
        except BaseException:
            for held in holds:
                hold_drop(held)
            raise
        latency_ms = int((time.monotonic() - started) * 1000)
        entry = _entry(config.kind, verdict, latency_ms, sum(map(len, texts)))
        if verdict.flagged:
            return Block(
                MSG_FLAGGED.format(reasons=", ".join(verdict.reasons)),
                status=403,
                metadata={
                    "reasons": list(verdict.reasons),
                    "flagged_input": middle_truncated(verdict.flagged_text, FLAGGED_INPUT_CHARS),
                    "provider_name": verdict.provider_name,
                    "model_slug": verdict.model_slug,
                },
                error_type=ErrorType.CONTENT_POLICY_VIOLATION,
                entries=(entry,),
                cost_usd=verdict.cost_usd or Decimal(0),  # the engine's call ran: charged with the refusal
                holds=holds,  # out of its hold
            )
        figures = {
            "engine": config.kind,
            "model": verdict.model_slug,
            "provider": verdict.provider_slug,
            "latency_ms": latency_ms,
            "flagged": False,
        }
        return Staged(
            request=request,
            entries=(entry,),
            cost_usd=verdict.cost_usd,
            record={"moderation_latency": latency_ms, "plugins": {PLUGIN_ID: figures}},
            holds=holds,  # the request's own hold takes it over
        )


def _entry(engine: str, verdict: Verdict, latency_ms: int, chars: int) -> StageEntry:
    return StageEntry(
        type="request_plugin",
        name=PLUGIN_ID,
        outcome="flagged" if verdict.flagged else "passed",
        data={
            "engine": engine,
            "model": verdict.model_slug,
            "provider": verdict.provider_slug,
            "latency_ms": latency_ms,
            "checked_chars": chars,
            "flagged": verdict.flagged,
            "reasons": list(verdict.reasons),
        },
        cost_usd=verdict.cost_usd or None,
    )


def input_texts(request: CanonicalRequest) -> list[str]:
    """The texts the engine reads, in order."""
    texts = [request.instructions] if request.instructions else []
    for item in request.input:
        if isinstance(item, Message):
            texts += [part.text for part in item.content if isinstance(part, TextPart) and part.text]
        elif isinstance(item, FunctionCallOutput) and item.output:
            texts.append(item.output)
    return texts


def middle_truncated(text: str, limit: int) -> str:
    """`text` in at most `limit` characters: its start and end around "..." when longer."""
    if len(text) <= limit:
        return text
    keep = limit - 3
    head = (keep + 1) // 2
    return text[:head] + "..." + text[len(text) - (keep - head) :]
