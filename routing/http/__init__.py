"""The ONE package that makes outbound HTTP calls (urllib3's public API).

Pooled keep-alive connections, a connect and a read timeout on every call, no redirects, no proxies
or credentials from the environment, and destinations checked before connecting: private, loopback,
link-local and other non-global addresses (also when embedded in an IPv6 address) are refused unless the
operator allows them. The address that was checked is the one connected to (no second DNS lookup), so DNS
rebinding cannot slip past (destinations.py).

Hostile or broken upstreams are bounded too. Every call has deadlines besides the per-read timeout: a
streaming call's response head must arrive within `first_byte` seconds and the whole stream within
`stream_max`; a non-streaming call (head and body) within `total`. The process's deadline watcher shuts the
socket down when a deadline passes, so an upstream that trickles one byte just under the read timeout is cut on
time (watch.py). Non-streaming bodies are read incrementally up to a size cap, error bodies up to
MAX_ERROR_BODY. Headers are checked before sending, and anything that fails while sending is a TransportError
(an attempt failure), never an exception the caller does not expect (errors.py).
"""

from gateway.netaddr import is_public_address
from routing.http.client import (
    FINISH_BYTES,
    FINISH_SECONDS,
    MAX_ERROR_BODY,
    Response,
    Timeouts,
    at_most,
    close,
    default_timeouts,
    finish,
    iter_body,
    request,
)
from routing.http.errors import (
    ConnectFailed,
    ConnectionRefused,
    ConnectionReset,
    ConnectTimeout,
    ReadTimeout,
    ResponseTooLarge,
    SendFailed,
    TransportError,
)

__all__ = [
    "FINISH_BYTES",
    "FINISH_SECONDS",
    "MAX_ERROR_BODY",
    "ConnectFailed",
    "ConnectTimeout",
    "ConnectionRefused",
    "ConnectionReset",
    "ReadTimeout",
    "Response",
    "ResponseTooLarge",
    "SendFailed",
    "Timeouts",
    "TransportError",
    "at_most",
    "close",
    "default_timeouts",
    "finish",
    "is_public_address",
    "iter_body",
    "request",
]
