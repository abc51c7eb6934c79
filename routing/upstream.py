"""One attempt against one endpoint: build the request, send it through routing.http, and return the
canonical response or a stream of canonical events. Every failure becomes an UpstreamError."""

import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from byok.credentials import ProviderCredentials
from routing import http
from routing.canonical import CanonicalRequest, CanonicalResponse, StreamEvent
from routing.catalog import EndpointInfo
from routing.errors import UpstreamError
from routing.providers.base import UpstreamRequest
from routing.providers.registry import adapter_for
from routing.providers.vertex.auth import vertex_credentials

MAX_ERROR_BODY = 64 * 1024

TRANSPORT_ERRORS = {
    "timeout": ("timeout", "The provider did not answer in time"),
    "connect": ("provider_unavailable", "Could not connect to the provider"),
    "refused": ("provider_unavailable", "The provider's address is not allowed (private network)"),
    "protocol": ("provider_unavailable", "The connection to the provider broke"),
}


def transport_error(exc: http.TransportError) -> UpstreamError:
    error_type, message = TRANSPORT_ERRORS.get(exc.kind, TRANSPORT_ERRORS["protocol"])
    return UpstreamError(error_type=error_type, message=message, retryable=True)


def build_upstream_request(
    *, endpoint: EndpointInfo, request: CanonicalRequest, credentials: ProviderCredentials
) -> UpstreamRequest:
    """The upstream request; credentials that need an exchange first (Vertex service accounts) get it here,
    so adapters stay pure. A failed exchange is an UpstreamError like any other attempt's failure."""
    if endpoint.adapter == "vertex":
        credentials = vertex_credentials(credentials)
    return adapter_for(endpoint.adapter).build_request(request, base_url=endpoint.base_url, credentials=credentials)


def _send(endpoint: EndpointInfo, upstream: UpstreamRequest, *, stream: bool, timeouts: http.Timeouts | None):
    try:
        body = {"content": upstream.content} if upstream.content is not None else {"json_body": upstream.body}
        response = http.request("POST", upstream.url, headers=upstream.headers, **body,
                                timeouts=timeouts, stream=stream,
                                allow_private=endpoint.allow_private_network and not upstream.customer_url)
    except http.TransportError as exc:
        raise transport_error(exc) from exc
    if response.status_code >= 400 or response.status_code < 200:
        try:
            body = response.raw.read(MAX_ERROR_BODY, decode_content=True) if stream else response.content
        except Exception:
            body = b""
        finally:
            response.close()
        raise adapter_for(endpoint.adapter).map_error(response.status_code, body, response.headers)
    return response


def call(
    *, endpoint: EndpointInfo, upstream: UpstreamRequest, timeouts: http.Timeouts | None = None
) -> CanonicalResponse:
    response = _send(endpoint, upstream, stream=False, timeouts=timeouts)
    try:
        body = response.json()
    except (ValueError, json.JSONDecodeError):
        raise UpstreamError(error_type="provider_unavailable", message="The provider sent an unreadable response",
                            retryable=True, status=response.status_code) from None
    finally:
        response.close()
    if not isinstance(body, dict):
        raise UpstreamError(error_type="provider_unavailable", message="The provider sent an unexpected response",
                            retryable=True, status=response.status_code)
    try:
        return adapter_for(endpoint.adapter).parse_response(body)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UpstreamError(error_type="provider_unavailable", message="The provider sent a malformed response",
                            retryable=True, status=response.status_code) from exc


@dataclass
class UpstreamStream:
    """An open upstream stream. Iterate `events()`; always `close()` (it releases the connection)."""

    endpoint: EndpointInfo
    response: object
    opened_at: float = field(default_factory=time.monotonic)

    def events(self) -> Iterator[StreamEvent]:
        adapter = adapter_for(self.endpoint.adapter)
        try:
            yield from adapter.stream_events(adapter.decode(http.iter_body(self.response)))
        except http.TransportError as exc:
            raise transport_error(exc) from exc
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise UpstreamError(error_type="provider_unavailable", message="The provider sent a malformed stream",
                                retryable=True) from exc
        finally:
            self.close()

    def close(self) -> None:
        """Release the upstream connection at once, waking any thread blocked reading it."""
        connection = getattr(self.response.raw, "_connection", None)
        sock = getattr(connection, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.response.close()


def open_stream(
    *, endpoint: EndpointInfo, upstream: UpstreamRequest, timeouts: http.Timeouts | None = None
) -> UpstreamStream:
    return UpstreamStream(endpoint=endpoint, response=_send(endpoint, upstream, stream=True, timeouts=timeouts))
