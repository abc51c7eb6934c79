"""The attempt engine: the one fallback loop. An `AttemptSequence` tries a plan's candidates in order, records
each attempt (health, latency, `provider_responses`), decides retryable vs final, remembers the served
endpoint for the session, and returns a complete canonical response (`call`) or an open canonical event stream
(`open_stream`) that still falls back to the next candidate while nothing was sent to the client.

A sequence holds only its own state: create one per attempt sequence (several per request, or several in
parallel, share nothing mutable)."""

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, TypeVar

from django.db import connection

from gateway.billing.generations import AttemptRecord
from routing import upstream
from routing.accumulate import Fold, FoldStep
from routing.canonical import (
    CanonicalRequest,
    CanonicalResponse,
    Finished,
    ResponseStarted,
    StreamEvent,
    Usage,
    UsageReported,
)
from routing.catalog import EndpointInfo
from routing.errors import ErrorType, UpstreamError
from routing.health import health_record, sticky_set
from routing.output_bound import CUT_REASON, OutputBudget, output_budget
from routing.providers.base import UpstreamRequest
from routing.providers.embeddings import EmbeddingRequest, EmbeddingResponse
from routing.selection import Candidate

__all__ = [
    "WAITING",
    "AttemptRecord",
    "AttemptSequence",
    "AttemptStream",
    "AttemptsFailed",
    "Embedded",
    "Served",
    "release_db_connection",
]

NOT_CONTENT: Final = (ResponseStarted, UsageReported, Finished)
T = TypeVar("T")


class _Waiting:
    """Yielded by `AttemptStream.events()` while the first content is awaited (time for a keep-alive)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "WAITING"


WAITING: Final = _Waiting()


class AttemptsFailed(Exception):
    """No candidate served. `error` is the last attempt's (None only when no candidate was left to try)."""

    def __init__(self, error: UpstreamError | None):
        super().__init__(str(error))
        self.error = error


@dataclass(frozen=True, slots=True)
class Served:
    candidate: Candidate
    response: CanonicalResponse  # usage already bounded


@dataclass(frozen=True, slots=True)
class Embedded:
    candidate: Candidate
    response: EmbeddingResponse


@dataclass(frozen=True, slots=True)
class _Opened:
    candidate: Candidate
    stream: upstream.UpstreamStream
    upstream_body: dict[str, Any]
    started: float
    budget: OutputBudget  # what the request allows this endpoint to write (routing.output_bound)


def release_db_connection() -> None:
    """Return this thread's database connection (to the pool on PostgreSQL); Django reopens it on demand."""
    if connection.connection is not None and not connection.in_atomic_block:  # (none open: the usual case)
        connection.close()


def _unbounded(response: CanonicalResponse, candidate: Candidate) -> Usage:
    return response.usage


def _budget(request: CanonicalRequest | EmbeddingRequest, endpoint: EndpointInfo) -> OutputBudget:
    return output_budget(request, endpoint) if isinstance(request, CanonicalRequest) else OutputBudget(0)


class AttemptSequence:
    """One pass over the candidates. `request_for` builds the canonical request one candidate is sent (its
    model and service tier); `bound_usage` makes a provider's reported usage plausible before it is recorded;
    `sticky_key` (when set) remembers the endpoint that served."""

    def __init__(
        self,
        *,
        candidates: Sequence[Candidate],
        request_for: Callable[[Candidate], CanonicalRequest] | Callable[[Candidate], EmbeddingRequest],
        bound_usage: Callable[[CanonicalResponse, Candidate], Usage] = _unbounded,
        sticky_key: str = "",
    ) -> None:
        self._remaining = iter(candidates)
        self._request_for = request_for
        self._bound_usage = bound_usage
        self._sticky_key = sticky_key
        self.attempts: list[AttemptRecord] = []
        self.served: Candidate | None = None

    # ---- the loop ----
    def _attempt(
        self, action: Callable[[Candidate, UpstreamRequest], T]
    ) -> tuple[Candidate, UpstreamRequest, T, float, OutputBudget]:
        """The first candidate `action` succeeds with, and the output its request allows; raises
        AttemptsFailed when none is left or one failed for good (a non-retryable error: bad input fails the same
        way everywhere)."""
        last_error = None
        for candidate in self._remaining:
            started = time.monotonic()
            try:
                credentials = candidate.credentials()  # decrypted now, for this attempt only (byok)
                release_db_connection()  # an upstream call may take minutes: do not hold a pooled connection
                canonical = self._request_for(candidate)
                request = upstream.build_upstream_request(
                    endpoint=candidate.endpoint, request=canonical, credentials=credentials
                )
                budget = _budget(canonical, candidate.endpoint)
                return candidate, request, action(candidate, request), started, budget
            except UpstreamError as error:
                self.record(candidate, started, error)
                last_error = error
                if not error.retryable:
                    break
        raise AttemptsFailed(last_error)

    def record(
        self,
        candidate: Candidate,
        started: float,
        error: UpstreamError | None,
        usage: Usage | None = None,
        ttft_s: float | None = None,
    ) -> None:
        elapsed = time.monotonic() - started
        if error is None or error.retryable:  # bad input says nothing about the endpoint's health
            generating = elapsed - (ttft_s or 0)
            throughput = usage.output_tokens / generating if usage and usage.output_tokens and generating > 0 else None
            health_record(
                endpoint_id=candidate.endpoint.id,
                ok=error is None,
                latency_s=elapsed,
                ttft_s=ttft_s,
                throughput=throughput,
            )
        self.attempts.append(
            AttemptRecord(
                provider_name=candidate.endpoint.provider_slug,
                status=200 if error is None else error.status,
                latency_ms=int((time.monotonic() - started) * 1000),
                is_byok=candidate.is_byok,
                endpoint_id=candidate.endpoint.id,
                model_permaslug=candidate.endpoint.model_id,
                error_type=error.error_type if error else None,
            )
        )

    def _succeeded(
        self, candidate: Candidate, started: float, response: CanonicalResponse, ttft_s: float | None = None
    ) -> CanonicalResponse:
        response = replace(response, usage=self._bound_usage(response, candidate))
        self.record(candidate, started, None, usage=response.usage, ttft_s=ttft_s)
        self.served = candidate
        if self._sticky_key:
            sticky_set(key=self._sticky_key, endpoint_id=candidate.endpoint.id)
        return response

    # ---- the two ways to call ----
    def call(self) -> Served:
        """A complete response from the first candidate that gives one."""
        candidate, _, response, started, budget = self._attempt(
            lambda candidate, request: upstream.call(endpoint=candidate.endpoint, upstream=request)
        )
        response = budget.response(response)  # an answer longer than allowed ends where it should
        return Served(candidate=candidate, response=self._succeeded(candidate, started, response))

    def embed(self, *, expected: int) -> Embedded:
        """Embeddings from the first candidate that gives them (`request_for` builds an EmbeddingRequest)."""
        candidate, _, response, started, _ = self._attempt(
            lambda candidate, request: upstream.embed(endpoint=candidate.endpoint, upstream=request, expected=expected)
        )
        self.record(candidate, started, None, usage=response.usage)
        self.served = candidate
        if self._sticky_key:
            sticky_set(key=self._sticky_key, endpoint_id=candidate.endpoint.id)
        return Embedded(candidate=candidate, response=response)

    def _open(self) -> _Opened:
        candidate, request, stream, started, budget = self._attempt(
            lambda candidate, request: upstream.open_stream(endpoint=candidate.endpoint, upstream=request)
        )
        return _Opened(candidate=candidate, stream=stream, upstream_body=request.body, started=started, budget=budget)

    def open_stream(self, *, keepalive_interval: float, committed: Callable[[], bool] | None = None) -> "AttemptStream":
        """The first candidate that answers with 200, as a stream; raises AttemptsFailed."""
        return AttemptStream(self, self._open(), keepalive_interval=keepalive_interval, committed=committed)


class AttemptStream:
    """An open canonical event stream, folded as it arrives (routing.accumulate). `events()` yields the fold's
    steps for each upstream event that made any (and WAITING while the first content is awaited); a failure
    before anything was committed to the client moves on to the next candidate, a later or final one is raised
    as UpstreamError. `committed` says whether content reached the client (default: a step was yielded).
    An answer longer than the request allows (routing.output_bound) is `cut` there: the rest is never read, and
    the answer ends incomplete for max_output_tokens. Always `close()`."""

    def __init__(
        self,
        sequence: AttemptSequence,
        opened: _Opened,
        *,
        keepalive_interval: float,
        committed: Callable[[], bool] | None,
    ) -> None:
        self._sequence = sequence
        self._opened: _Opened | None = opened
        self._interval = keepalive_interval
        self._committed = committed or (lambda: self.first_content_at is not None)
        self.upstream_body = opened.upstream_body  # the first attempt's body (for debug echo)
        self.candidate: Candidate = opened.candidate  # the attempt under way (or the last one)
        self.fold = Fold()  # the one fold of the current attempt's events
        self._budget = opened.budget
        self.cut = False  # the answer reached its output bound
        self.first_content_at: float | None = None
        self.response: CanonicalResponse | None = None  # set when the stream completed (usage bounded)

    def events(self) -> Iterator[list[FoldStep] | _Waiting]:
        while self._opened is not None:
            opened = self._opened
            try:
                yield from self._relay(opened)
                return
            except UpstreamError as error:
                self._sequence.record(opened.candidate, opened.started, error)
                opened.stream.close()
                if self._committed() or not error.retryable:
                    raise
                self.fold = Fold()
                try:
                    self._opened = self._sequence._open()
                except AttemptsFailed as failed:
                    self._opened = None
                    raise (failed.error or error) from None
                self.candidate = self._opened.candidate
                self._budget = self._opened.budget

    def _relay(self, opened: _Opened) -> Iterator[list[FoldStep] | _Waiting]:
        events = opened.stream.events()
        ended = False
        for kind, event in _until_first_content(events, self._interval):
            if kind == "waiting":
                yield WAITING
            elif kind == "event":
                assert event is not None
                if steps := self._add(event):
                    yield steps
                if self.cut:  # (the helper thread reads nothing after a content event: it stopped)
                    break
            else:
                ended = kind == "end"
        if not ended and not self.cut:
            yield from self._batched(events, opened.stream.buffered)
        if self.cut:
            opened.stream.close()  # the rest of the answer is not read: the connection is dropped, not drained
        if not self.fold.has_output() and self.fold.finished is None:
            raise UpstreamError(
                error_type=ErrorType.PROVIDER_UNAVAILABLE, message="The provider's stream had no output", retryable=True
            )
        ttft_s = self.first_content_at - opened.started if self.first_content_at is not None else None
        self.response = self._sequence._succeeded(opened.candidate, opened.started, self.fold.response(), ttft_s=ttft_s)

    def _batched(self, events: Iterator[StreamEvent], buffered: Callable[[], bool]) -> Iterator[list[FoldStep]]:
        """The steps of the events at hand, together: the events that arrived in one read are relayed as two
        writes, the first event's and the rest's (a failure after some of them first lets those go out, as they
        would have one by one). The first goes alone because a write to a connection the client closed succeeds:
        the next one fails, and that is how a client that left during a pause of the provider is noticed (the
        stream is recorded cancelled) before the rest of the answer is relayed and settled as served."""
        batch: list[FoldStep] = []
        fresh = True  # the next event is the first of a read
        try:
            for event in events:
                if steps := self._add(event):
                    batch += steps
                if self.cut:
                    break
                if batch and (fresh or not buffered()):
                    yield batch
                    batch = []
                    fresh = not buffered()
        except Exception:
            if batch:
                yield batch
            raise
        if batch:
            yield batch

    def _add(self, event: StreamEvent) -> list[FoldStep]:
        if self.first_content_at is None and not isinstance(event, NOT_CONTENT):
            self.first_content_at = time.monotonic()
        budget, fold = self._budget, self.fold
        bounded = budget.event(event)
        steps = fold.add(bounded) if bounded is not None else []
        if budget.exhausted:  # the answer ends here, as if the provider had stopped at the maximum
            self.cut = fold.cut = True
            fold.add(Finished(status="incomplete", incomplete_reason=CUT_REASON))
        return steps

    def close(self) -> None:
        if self._opened is not None:
            self._opened.stream.close()


def _until_first_content(events: Iterator[StreamEvent], interval: float) -> Iterator[tuple[str, StreamEvent | None]]:
    """Pull upstream events in a helper thread until the first content event (or the end), yielding
    ("waiting", None) while waiting and ("event", e) for each event; the caller then reads `events` itself.
    The helper stops before the caller resumes, so the iterator is never used by two threads at once."""
    box: queue.Queue[tuple[str, object]] = queue.Queue()

    def pull() -> None:
        try:
            for event in events:
                box.put(("event", event))
                if not isinstance(event, NOT_CONTENT):
                    break
            else:
                box.put(("end", None))
                return
            box.put(("first", None))
        except BaseException as exc:  # handed over to the generator's thread
            box.put(("error", exc))

    threading.Thread(target=pull, name="first-content", daemon=True).start()
    while True:
        try:
            kind, value = box.get(timeout=interval)
        except queue.Empty:
            yield "waiting", None
            continue
        if kind == "error":
            assert isinstance(value, BaseException)
            raise value
        if kind == "event":
            yield "event", value  # type: ignore[misc]
            continue
        yield kind, None  # "first" (content has begun) or "end" (the upstream finished)
        return
