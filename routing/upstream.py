"""One attempt against one endpoint: build the request, send it through routing.http, and return the
canonical response or a stream of canonical events. Every failure becomes an UpstreamError, and every
UpstreamError leaves the attempt scrubbed of the credentials that attempt sent (routing.redact): its text may
come from the upstream, and it reaches the client, the logs and the generation record. So do the identifiers of
an answer (its id, model and service tier): kept only when they are short clean tokens."""

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from django.conf import settings

from byok.credentials import ProviderCredentials
from routing import http, jsonsafe
from routing.canonical import CanonicalRequest, CanonicalResponse, StreamEvent
from routing.catalog import EndpointInfo
from routing.errors import ErrorType, UpstreamError
from routing.providers.base import UpstreamRequest
from routing.providers.embeddings import EmbeddingRequest, EmbeddingResponse
from routing.providers.registry import adapter_for
from routing.redact import UPSTREAM_MODEL, request_secrets, scrub_error, scrub_event, scrub_response, scrub_token

Parsed = TypeVar("Parsed")  # what a body parser makes of the upstream body

MAX_ERROR_BODY = http.MAX_ERROR_BODY

# Each transport failure as the client sees it (by the exception's type; routing.http raises them).
TRANSPORT_ERRORS: dict[type[http.TransportError], tuple[ErrorType, str]] = {
    http.ConnectTimeout: (ErrorType.TIMEOUT, "The provider did not answer in time"),
    http.ReadTimeout: (ErrorType.TIMEOUT, "The provider did not answer in time"),
    http.ConnectFailed: (ErrorType.PROVIDER_UNAVAILABLE, "Could not connect to the provider"),
    http.ConnectionRefused: (ErrorType.PROVIDER_UNAVAILABLE, "The provider's address is not allowed (private network)"),
    http.ConnectionReset: (ErrorType.PROVIDER_UNAVAILABLE, "The connection to the provider broke"),
    http.SendFailed: (ErrorType.PROVIDER_UNAVAILABLE, "The request could not be sent to the provider"),
    http.ResponseTooLarge: (ErrorType.PROVIDER_UNAVAILABLE, "The provider sent an oversized response"),
}
# Credential fields of structured credentials (cloud platforms, Azure configs, service accounts).
SECRET_FIELDS = (
    "api_key",
    "private_key",
    "private_key_id",
    "secretAccessKey",
    "accessKeyId",
    "sessionToken",
    "client_secret",
    "refresh_token",
    "access_token",
)


def transport_error(exc: http.TransportError) -> UpstreamError:
    error_type, message = TRANSPORT_ERRORS.get(type(exc), TRANSPORT_ERRORS[http.ConnectionReset])
    return UpstreamError(error_type=error_type, message=message, retryable=True)


def credential_secrets(credentials: ProviderCredentials) -> tuple[str, ...]:
    """The secret strings in a credential (the key itself and the secret fields of its structured parts)."""
    values: list[object] = [credentials.api_key]
    mappings: list[object] = []
    if isinstance(credentials.extra, dict):
        mappings += [credentials.extra, credentials.extra.get("azure_config")]
    if (credentials.api_key or "").lstrip().startswith("{"):
        try:
            mappings.append(json.loads(credentials.api_key))
        except ValueError:
            pass
    for mapping in mappings:
        if isinstance(mapping, dict):
            values += [mapping.get(name) for name in SECRET_FIELDS]
    return tuple(value for value in values if isinstance(value, str) and value)


@contextmanager
def _scrubbed(secrets: tuple[str, ...]) -> Iterator[None]:
    try:
        yield
    except UpstreamError as error:
        scrub_error(error, secrets)
        raise


def build_upstream_request(
    *, endpoint: EndpointInfo, request: CanonicalRequest | EmbeddingRequest, credentials: ProviderCredentials
) -> UpstreamRequest:
    """The upstream request; credentials that need an exchange first get it from the adapter's
    `prepare_credentials` hook. A failed exchange is an UpstreamError like any other attempt's failure."""
    secrets = credential_secrets(credentials)
    adapter = adapter_for(endpoint.adapter)
    with _scrubbed(secrets):
        prepared = adapter.prepare_credentials(credentials)
        if prepared is not credentials:
            secrets += credential_secrets(prepared)
        if isinstance(request, EmbeddingRequest):
            built = adapter.build_embeddings_request(request, base_url=endpoint.base_url, credentials=prepared)
        else:
            built = adapter.build_request(request, base_url=endpoint.base_url, credentials=prepared)
    return replace(built, secrets=tuple(dict.fromkeys(built.secrets + secrets)))


def attempt_secrets(upstream: UpstreamRequest) -> tuple[str, ...]:
    return request_secrets(url=upstream.url, headers=upstream.headers, extra=upstream.secrets)


def _send(
    endpoint: EndpointInfo, upstream: UpstreamRequest, *, stream: bool, timeouts: http.Timeouts | None
) -> http.Response:
    try:
        payload: dict[str, Any] = (
            {"content": upstream.content} if upstream.content is not None else {"json_body": upstream.body}
        )
        response = http.request(
            "POST",
            upstream.url,
            headers=upstream.headers,
            **payload,
            timeouts=timeouts,
            stream=stream,
            allow_private=endpoint.allow_private_network and not upstream.customer_url,
        )
    except http.TransportError as exc:
        raise transport_error(exc) from exc
    if response.status_code >= 400 or response.status_code < 200:
        body = response.content  # read by routing.http, at most MAX_ERROR_BODY bytes
        http.close(response)
        raise adapter_for(endpoint.adapter).map_error(response.status_code, body, response.headers)
    return response


def call(
    *, endpoint: EndpointInfo, upstream: UpstreamRequest, timeouts: http.Timeouts | None = None
) -> CanonicalResponse:
    secrets = attempt_secrets(upstream)
    with _scrubbed(secrets):
        parse = adapter_for(endpoint.adapter).parse_response
        return scrub_response(_call(endpoint=endpoint, upstream=upstream, timeouts=timeouts, parse=parse), secrets)


def embed(
    *, endpoint: EndpointInfo, upstream: UpstreamRequest, expected: int, timeouts: http.Timeouts | None = None
) -> EmbeddingResponse:
    """Embeddings for `expected` inputs, like `call` (the adapter's `parse_embeddings` reads the body)."""
    adapter = adapter_for(endpoint.adapter)
    secrets = attempt_secrets(upstream)
    with _scrubbed(secrets):
        response = _call(
            endpoint=endpoint,
            upstream=upstream,
            timeouts=timeouts,
            parse=lambda body: adapter.parse_embeddings(body, expected=expected),
        )
    return replace(response, model=scrub_token(response.model, secrets, shape=UPSTREAM_MODEL))


def _call(
    *,
    endpoint: EndpointInfo,
    upstream: UpstreamRequest,
    timeouts: http.Timeouts | None,
    parse: Callable[[dict[str, Any]], Parsed],
) -> Parsed:
    response = _send(endpoint, upstream, stream=False, timeouts=timeouts)
    try:
        body = jsonsafe.loads(response.content)
    except ValueError:
        raise UpstreamError(
            error_type="provider_unavailable",
            message="The provider sent an unreadable response",
            retryable=True,
            status=response.status_code,
        ) from None
    finally:
        http.close(response)
    if not isinstance(body, dict):
        raise UpstreamError(
            error_type="provider_unavailable",
            message="The provider sent an unexpected response",
            retryable=True,
            status=response.status_code,
        )
    try:
        return parse(body)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UpstreamError(
            error_type="provider_unavailable",
            message="The provider sent a malformed response",
            retryable=True,
            status=response.status_code,
        ) from exc


@dataclass
class UpstreamStream:
    """An open upstream stream. Iterate `events()`; always `close()` (it releases the connection)."""

    endpoint: EndpointInfo
    response: http.Response
    opened_at: float = field(default_factory=time.monotonic)
    secrets: tuple[str, ...] = field(default=(), repr=False)
    _decoded: object = field(default=None, init=False, repr=False)  # the adapter's framing decoder, once reading

    def events(self) -> Iterator[StreamEvent]:
        adapter = adapter_for(self.endpoint.adapter)
        try:
            with _scrubbed(self.secrets):
                try:
                    chunks = http.iter_body(self.response, limit=settings.UPSTREAM_MAX_STREAM_BYTES)
                    self._decoded = decoded = adapter.decode(chunks)
                    for event in adapter.stream_events(decoded):
                        yield scrub_event(event, self.secrets)
                    http.finish(self.response, chunks)  # the closing chunk: keep the connection for the next call
                except http.TransportError as exc:
                    raise transport_error(exc) from exc
                except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
                    raise UpstreamError(
                        error_type="provider_unavailable",
                        message="The provider sent a malformed stream",
                        retryable=True,
                    ) from exc
        finally:
            self.close()

    def buffered(self) -> bool:
        """Whether upstream events already received wait to be taken (the next event may come without a read);
        False when the framing cannot tell."""
        return getattr(self._decoded, "pending", False)

    def close(self) -> None:
        """Release the upstream connection at once, waking any thread blocked reading it."""
        http.close(self.response)


def open_stream(
    *, endpoint: EndpointInfo, upstream: UpstreamRequest, timeouts: http.Timeouts | None = None
) -> UpstreamStream:
    secrets = attempt_secrets(upstream)
    with _scrubbed(secrets):
        response = _send(endpoint, upstream, stream=True, timeouts=timeouts)
    return UpstreamStream(endpoint=endpoint, response=response, secrets=secrets)
