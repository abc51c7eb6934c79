"""What an outbound call that did not produce a usable HTTP response raises, and how urllib3's and the
socket's exceptions map onto it."""

from typing import ClassVar

from urllib3.exceptions import ConnectTimeoutError, HTTPError, LocationValueError, NewConnectionError, ReadTimeoutError


class TransportError(Exception):
    """The call did not produce a usable HTTP response; the subclass says how (`kind` names it: timeout,
    connect, refused, protocol, send, too_large). The message never holds request data."""

    kind: ClassVar[str] = "protocol"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class ConnectTimeout(TransportError):
    kind = "timeout"  # no connection within the connect timeout


class ReadTimeout(TransportError):
    kind = "timeout"  # connected, but the answer (or the next bytes) did not come in time, or a deadline passed


class ConnectFailed(TransportError):
    kind = "connect"  # no connection (refused by the peer, unreachable, name not resolved)


class ConnectionRefused(TransportError):
    kind = "refused"  # the destination is not allowed (private network)


class ConnectionReset(TransportError):
    kind = "protocol"  # the connection broke (reset, cut mid-body, malformed HTTP)


class SendFailed(TransportError):
    kind = "send"  # the request could not be sent (a header that cannot be encoded, an invalid URL)


class ResponseTooLarge(TransportError):
    kind = "too_large"  # the body exceeds the cap


TIMEOUTS = (TimeoutError, ReadTimeoutError)  # socket.timeout is TimeoutError


def deadline_passed() -> ReadTimeout:
    return ReadTimeout("upstream exceeded its deadline")


def connect_failed(exc: BaseException) -> bool:
    """urllib3 could not connect (nothing was sent): another checked address of the host may answer."""
    return isinstance(exc, NewConnectionError | ConnectTimeoutError)


def may_echo_request(exc: Exception) -> bool:
    """Exceptions whose text can quote a header value (a credential): their chain is dropped."""
    return isinstance(exc, UnicodeError | ValueError) or not isinstance(exc, HTTPError)


def send_failure(exc: Exception, *, fired: bool) -> TransportError:
    """The TransportError for what urlopen raised (`fired`: the call's deadline passed meanwhile)."""
    if isinstance(exc, TransportError):
        return exc
    if fired:
        return deadline_passed()
    if isinstance(exc, LocationValueError):  # an invalid URL or unknown scheme
        return SendFailed(f"the request could not be sent ({type(exc).__name__})")
    if isinstance(exc, NewConnectionError):  # (a subclass of ConnectTimeoutError in urllib3 2)
        if _caused_by(exc.__cause__, TimeoutError) if exc.__cause__ else False:
            return ConnectTimeout("connection timed out")
        return ConnectFailed("could not connect to upstream")
    if isinstance(exc, ConnectTimeoutError):
        return ConnectTimeout("connection timed out")
    if _caused_by(exc, TIMEOUTS):
        return ReadTimeout("upstream did not answer in time")
    if isinstance(exc, HTTPError | ConnectionError):  # reset, cut, malformed HTTP, TLS failure
        return ConnectionReset(f"upstream request failed: {type(exc).__name__}")
    # UnicodeEncodeError (a non-Latin-1 header), ValueError (invalid header characters), or anything else raised
    # while sending: the attempt failed; the next candidate may serve.
    return SendFailed(f"the request could not be sent ({type(exc).__name__})")


def read_failure(exc: Exception, *, fired: bool) -> TransportError:
    """The TransportError for what reading a body raised."""
    if fired:
        return deadline_passed()
    if _caused_by(exc, TIMEOUTS):
        return ReadTimeout("upstream stalled")
    return ConnectionReset("upstream stream broke")


def _caused_by(exc: BaseException, kind: type | tuple[type, ...]) -> bool:
    seen = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, kind):
            return True
        reason = getattr(current, "reason", None)  # urllib3's wrapped error (a UnicodeError's is a string)
        stack.extend(
            [
                current.__cause__,
                current.__context__,
                reason if isinstance(reason, BaseException) else None,
                *[arg for arg in getattr(current, "args", ()) if isinstance(arg, BaseException)],
            ]
        )
    return False
