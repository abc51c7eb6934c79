"""One JSON log line per request and the request metrics, from the outermost middleware.

The line (logger `gateway.access`): time, request id (the client's X-Request-Id when it is a short token, else a
new one; sent back as X-Request-Id), method, route (the URL pattern, never the path's values), status, latency,
and for model requests the generation id, account, the key hash's first 12 characters, model, provider, tokens
and cost. Never a header value, a key, a query string or a body. A stream's line is written when its last byte
is sent (its tokens and cost are known then)."""

import json
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator
from decimal import Decimal
from typing import Any

from django.http import FileResponse, HttpRequest, StreamingHttpResponse
from django.http.response import HttpResponseBase

from gateway.accounts.authentication import Caller
from gateway.billing.generations import GenerationRecord
from gateway.console import metrics
from gateway.renderers import json_compact

logger = logging.getLogger("gateway.access")
REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
KEY_HASH_PREFIX = 12
MAX_PENDING = 10_000  # settled records waiting for their request's log line (bounded: some never are logged)

_pending: "OrderedDict[str, dict[str, Any]]" = OrderedDict()
_pending_lock = threading.Lock()


def note_settled(record: GenerationRecord, charged: Decimal | None) -> None:
    """Settlement observer: the record's figures for the request's log line, and its metrics."""
    metrics.record_settled(record, charged)
    facts = {
        "model": record.model or record.requested_model,
        "provider": record.provider,
        "generation_status": record.status,
        "tokens_input": record.tokens_input,
        "tokens_output": record.tokens_output,
        "cost": float(charged) if charged is not None else 0.0,
        "byok": record.is_byok,
    }
    with _pending_lock:
        _pending[record.id] = facts
        if len(_pending) > MAX_PENDING:
            _pending.popitem(last=False)


def _take(generation_id: str) -> dict[str, Any]:
    with _pending_lock:
        return _pending.pop(generation_id, None) or {}


def _encoded(line: dict[str, Any]) -> str:
    """The line as JSON in ASCII, as the standard encoder writes it (a client-chosen model name with a Unicode line
    separator must not split it), at orjson's speed when it is ASCII anyway (nearly always)."""
    encoded = json_compact(line)
    return encoded.decode() if encoded.isascii() else json.dumps(line, separators=(",", ":"))


def _route(request: HttpRequest) -> str:
    match = getattr(request, "resolver_match", None)
    if match is None:
        return "unmatched"
    route = match.route or "unmatched"
    return "admin/" if route.startswith("admin/") else route


class ClosingContent:
    """A stream's content that calls `on_close` when the response is closed: the server closes it once the last
    byte is sent or the client is gone, and Django closes the content it was given (the documented way to wrap
    `streaming_content`). Chunks pass straight through: iterating gives the wrapped iterator itself."""

    def __init__(self, content: Iterable[bytes] | AsyncIterable[bytes], on_close: Callable[[], None]) -> None:
        self.content = content
        self.on_close = on_close

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.content)  # type: ignore[arg-type]  # async content: TypeError, Django then takes __aiter__

    def __aiter__(self) -> AsyncIterator[bytes]:
        return aiter(self.content)  # type: ignore[arg-type]

    def close(self) -> None:
        self.on_close()


class RequestLogMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        started = time.perf_counter()
        incoming = request.META.get("HTTP_X_REQUEST_ID", "")
        request_id = incoming if REQUEST_ID.match(incoming) else os.urandom(12).hex()
        request.request_id = request_id  # type: ignore[attr-defined]  # this middleware's own attribute
        response = self.get_response(request)
        response["X-Request-Id"] = request_id
        if isinstance(response, StreamingHttpResponse) and not isinstance(response, FileResponse):
            metrics.OPEN_STREAMS.inc()
            response.streaming_content = ClosingContent(
                response.streaming_content, lambda: self._finish(request, response, started, streamed=True)
            )
        else:  # a file (static) is logged at once: wrapping its content would cost the server's sendfile
            self._finish(request, response, started, streamed=False)
        return response

    def _finish(self, request: HttpRequest, response: HttpResponseBase, started: float, *, streamed: bool) -> None:
        try:
            elapsed = time.perf_counter() - started
            route = _route(request)
            status = response.status_code
            if streamed:
                metrics.OPEN_STREAMS.dec()
            metrics.labelled(metrics.REQUESTS, route, str(status)).inc()
            metrics.labelled(metrics.REQUEST_SECONDS, route).observe(elapsed)
            generation_id = response.get("X-Generation-Id")
            facts = _take(generation_id) if generation_id else {}
            if not logger.isEnabledFor(logging.INFO):
                return
            line = {
                "ts": round(time.time(), 3),
                "request_id": request.request_id,  # type: ignore[attr-defined]
                "method": request.method,
                "route": route,
                "status": status,
                "latency_ms": round(elapsed * 1000, 1),
            }
            if streamed:
                line["stream"] = True
            caller = request.__dict__.get("user")  # set by API authentication; never evaluates a session user
            if isinstance(caller, Caller):
                line["account_id"] = str(caller.account_id)
                line["key_hash_prefix"] = caller.key_hash[:KEY_HASH_PREFIX]
            if generation_id:
                line["generation_id"] = generation_id
                line.update(facts)
            logger.info(_encoded(line))
        except Exception:  # noqa: BLE001, S110  # the log line never fails a response
            pass
