import math

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle

from gateway.cache import cache_uses_redis, window_incr
from gateway.errors import GatewayError

MSG_RATE_LIMITER_UNAVAILABLE = "The rate limiter is unavailable; retry shortly"


class ApiKeyRateThrottle(SimpleRateThrottle):
    """Requests per API key in a fixed window, counted atomically in the shared cache (one Redis INCR per
    request, so concurrent requests cannot overshoot); off unless GATEWAY_RATE_LIMIT is set.

    When Redis is unavailable the count falls back to this process's memory (each worker then admits up to
    the limit: fail open, the default), or with GATEWAY_RATE_LIMIT_FAIL_OPEN=false requests are refused
    with 503 until Redis is back (fail closed)."""

    scope = "api_key"

    def get_rate(self):
        return settings.GATEWAY_RATE_LIMIT or None

    def allow_request(self, request, view):
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

    def wait(self):
        return getattr(self, "retry_after", None)

    def get_cache_key(self, request, view):
        if not getattr(request.user, "is_authenticated", False):
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.user.key_hash}
