import math
from typing import TYPE_CHECKING

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle

from gateway.accounts.authentication import Caller
from gateway.cache import cache_uses_redis, window_incr
from gateway.errors import GatewayError

if TYPE_CHECKING:  # DRF's views import this module (the API settings' throttle class)
    from rest_framework.request import Request
    from rest_framework.views import APIView

MSG_RATE_LIMITER_UNAVAILABLE = "The rate limiter is unavailable; retry shortly"


class ApiKeyRateThrottle(SimpleRateThrottle):
    """Requests per API key in a fixed window, counted atomically in the shared cache (one Redis INCR per
    request, so concurrent requests cannot overshoot); off unless GATEWAY_RATE_LIMIT is set.

    When Redis is unavailable the count falls back to this process's memory (each worker then admits up to
    the limit: fail open, the default), or with GATEWAY_RATE_LIMIT_FAIL_OPEN=false requests are refused
    with 503 until Redis is back (fail closed)."""

    scope = "api_key"

    def get_rate(self) -> str | None:
        return settings.GATEWAY_RATE_LIMIT or None

    def allow_request(self, request: "Request", view: "APIView") -> bool:
        self.rate = self.get_rate()
        if self.rate is None:
            return True
        num_requests, duration = self.parse_rate(self.rate)
        self.num_requests, self.duration = num_requests, duration
        self.key = self.get_cache_key(request, view)
        if self.key is None or num_requests is None or duration is None:
            return True
        counted = window_incr(key=self.key, seconds=duration)
        if not counted.shared and cache_uses_redis() and not settings.GATEWAY_RATE_LIMIT_FAIL_OPEN:
            raise GatewayError(
                MSG_RATE_LIMITER_UNAVAILABLE,
                status=503,
                headers={"Retry-After": str(max(1, math.ceil(settings.REDIS_RETRY_SECONDS)))},
            )
        self.retry_after = counted.retry_after
        return counted.count <= num_requests

    def wait(self) -> float | None:
        return getattr(self, "retry_after", None)

    def get_cache_key(self, request: "Request", view: "APIView") -> str | None:
        if not isinstance(request.user, Caller):
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.user.key_hash}
