"""Domain patterns of include/exclude (web) and allowed/blocked (web-fetch) lists.

- `example.com`: that host and its subdomains (`www.example.com`, `docs.example.com`);
- `*.example.com`: the subdomains only, not `example.com` itself;
- a path after the host (`example.com/blog`, `*.substack.com/p`): only URLs under that path (whole segments:
  `/blog` and `/blog/x`, not `/blogger`);
- a scheme (`https://`) or `www.` written in front is accepted and ignored; hosts compare case-insensitively.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

MAX_PATTERNS = 100
_HOST = re.compile(r"(?=.{1,253}$)([a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\.)*[a-z0-9-]{1,63}")


@dataclass(frozen=True, slots=True)
class Pattern:
    host: str  # without the wildcard
    subdomains_only: bool
    path: str  # "" or "/segment..." without a trailing slash

    @property
    def whole_host(self) -> bool:
        """An engine's own domain filter expresses it exactly (no wildcard restriction, no path)."""
        return not self.path and not self.subdomains_only

    def matches(self, host: str, path: str) -> bool:
        host = host.lower().rstrip(".")
        if self.subdomains_only:
            if not host.endswith("." + self.host):
                return False
        elif host != self.host and not host.endswith("." + self.host):
            return False
        if not self.path:
            return True
        path = unquote(path or "/")
        return path == self.path or path.startswith(self.path + "/")


def parse_pattern(raw: str) -> Pattern | None:
    text = raw.strip().lower()
    text = re.sub(r"^[a-z][a-z0-9+.-]*://", "", text)
    host, _, path = text.partition("/")
    subdomains_only = host.startswith("*.")
    host = host[2:] if subdomains_only else host
    host = host.split(":", 1)[0].rstrip(".")
    if host.startswith("www."):
        host = host[4:]
    if not _HOST.fullmatch(host) or "." not in host and host != "localhost":
        return None
    path = "/" + unquote(path).strip("/") if path.strip("/") else ""
    return Pattern(host=host, subdomains_only=subdomains_only, path=path)


def parse_patterns(values: Iterable[object] | None, *, field: str, error: type[Exception]) -> tuple[Pattern, ...]:
    """The patterns of a list, or `error` (a 400) naming the first one that is not a domain."""
    values = list(values or ())
    if len(values) > MAX_PATTERNS:
        raise error(f"{field}: at most {MAX_PATTERNS} domains")
    patterns = []
    for value in values:
        pattern = parse_pattern(value) if isinstance(value, str) else None
        if pattern is None:
            raise error(
                f"{field}: '{str(value)[:100]}' is not a domain pattern (example.com, *.example.com, example.com/path)"
            )
        patterns.append(pattern)
    return tuple(patterns)


def _host_path(url: str) -> tuple[str, str] | None:
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
    except ValueError:
        return None
    if not host:
        return None
    return host, parts.path


def url_matches(url: str, patterns: tuple[Pattern, ...] | list[str]) -> bool:
    """Whether the URL falls under any of the patterns (strings are parsed; invalid ones match nothing)."""
    parsed = [p if isinstance(p, Pattern) else parse_pattern(p) for p in patterns]
    where = _host_path(url)
    if where is None:
        return False
    host, path = where
    return any(p is not None and p.matches(host, path) for p in parsed)


def url_passes(url: str, *, include: tuple[Pattern, ...], exclude: tuple[Pattern, ...]) -> bool:
    if include and not url_matches(url, include):
        return False
    return not (exclude and url_matches(url, exclude))


def domain_allowed(url: str, allowed: Iterable[object] | None = None, blocked: Iterable[object] | None = None) -> bool:
    """The web-fetch rule: not blocked, and allowed when an allowed list is given (ValueError for a list item
    that is not a domain pattern)."""
    allow = parse_patterns(allowed, field="allowed_domains", error=ValueError)
    block = parse_patterns(blocked, field="blocked_domains", error=ValueError)
    return url_passes(url, include=allow, exclude=block)
