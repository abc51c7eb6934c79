"""Credentials out of upstream text. An upstream may echo what it was sent (an `Authorization` header in an
error body, a key in an in-band stream error), and its messages reach the client, the logs and the generation
records. routing.upstream scrubs every UpstreamError leaving an attempt with `scrub_error`: each credential sent
on that attempt is removed verbatim (and percent-encoded, and when the text ends with its first characters),
and so is anything shaped like a key (`sk-...`, `AKIA...`, `Bearer ...`, a JWT, a PEM private key, a long
token after a word like "key" or "token"). Ordinary prose is left alone."""

import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, quote, urlsplit

# Request headers whose values are credentials.
SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "x-amz-security-token", "cookie"}
)
REDACTED = "[redacted]"
MAX_MESSAGE = 2000  # characters of upstream text kept
MIN_EXACT = 4  # shorter credentials are removed only as whole words (scrubbing "ab" everywhere mangles prose)
MIN_TAIL = 6  # a text cut in the middle of a credential loses the credential's first characters too
FRAGMENT = 10  # a run of this many characters of a secret is removed wherever it appears
MIN_FRAGMENT_SECRET = 16  # ... for secrets (or '/'-separated parts of them) at least this long

_CREDENTIAL_PARAM = re.compile(r"key|token|secret|sig|auth|credential|password|code", re.IGNORECASE)
_SIGV4_PARTS = re.compile(r"(?:Credential|Signature)=([^,\s]+)")
_SHAPES = (
    (re.compile(r"-----BEGIN[A-Z ]*PRIVATE KEY-----.*?(?:-----END[A-Z ]*PRIVATE KEY-----|\Z)", re.DOTALL), REDACTED),
    (re.compile(r"\b(Bearer|Basic)(\s+)[A-Za-z0-9._~+/\-]{8,}=*", re.IGNORECASE), r"\1\2" + REDACTED),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{12,}"), "sk-" + REDACTED),
    (re.compile(r"\b(?:AKIA|ASIA|AIDA|AROA|AGPA|ANPA|ANVA|AIPA|ABIA|ACCA)[A-Z0-9]{16}\b"), REDACTED),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"), REDACTED),  # Google API keys
    (re.compile(r"\bya29\.[0-9A-Za-z_.\-]{10,}"), REDACTED),  # Google OAuth access tokens
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"), REDACTED),  # JWTs
    (re.compile(r"\b(?:gh[pousr]|github_pat|glpat|xox[abprs]|hf)_[A-Za-z0-9_\-]{16,}"), REDACTED),
)
# A long token (with at least one digit, so words are not mistaken for it) after a credential word.
_AFTER_WORD = re.compile(
    r"(?i)\b((?:api[-_ ]?)?keys?|tokens?|secrets?|passwords?|signatures?|credentials?|authorization|auth)"
    r"(\s*[\"']?\s*[:=]?\s*[\"']?\s*)([A-Za-z0-9+/_.\-]{16,}=*)"
)


def request_secrets(*, url: str, headers: dict, extra: Iterable[str] = ()) -> tuple[str, ...]:
    """Everything secret an attempt sends: credential header values (also the token after the scheme, and
    SigV4's access key id and signature), credential-like query parameters, plus `extra` (the credential
    material it was built from). Longest first, so a secret containing another is removed whole."""
    values = set(extra)
    for name, value in headers.items():
        if name.lower() not in SECRET_HEADERS or not isinstance(value, str):
            continue
        values.add(value)
        scheme, _, rest = value.strip().partition(" ")
        values.add(rest.strip())
        for part in _SIGV4_PARTS.findall(value):
            values.add(part)
            values.add(part.split("/", 1)[0])  # the access key id of Credential=AKIA.../date/region/...
    for name, value in parse_qsl(urlsplit(url).query, keep_blank_values=False):
        if _CREDENTIAL_PARAM.search(name):
            values.add(value)
    return tuple(sorted({v for v in values if isinstance(v, str) and v.strip()}, key=len, reverse=True))


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    if not text:
        return text
    secrets = tuple(secrets)
    text = _cut_fragments(text, secrets)
    for secret in secrets:
        if len(secret) < MIN_EXACT:
            text = re.sub(rf"(?<![A-Za-z0-9_\-]){re.escape(secret)}(?![A-Za-z0-9_\-])", REDACTED, text)
            continue
        text = text.replace(secret, REDACTED)
        quoted = quote(secret, safe="", errors="replace")
        if quoted != secret:
            text = text.replace(quoted, REDACTED)
        text = _cut_tail(text, secret)
    for pattern, replacement in _SHAPES:
        text = pattern.sub(replacement, text)
    text = _AFTER_WORD.sub(_redact_token, text)
    return text[:MAX_MESSAGE]


def _cut_fragments(text: str, secrets: tuple[str, ...]) -> str:
    """Any run of FRAGMENT or more characters of a long secret (any case), wherever it is: an upstream that echoes
    half a key ("sk-abc...") or its tail ("...xyz123") leaks part of it. Secrets are split on '/' and whitespace
    first, so the non-secret parts of structured values (a SigV4 scope: date, region, service) are not used."""
    pieces = {
        piece.lower()
        for secret in secrets
        for piece in re.split(r"[/\s]+", secret)
        if len(piece) >= MIN_FRAGMENT_SECRET
    }
    if not pieces or len(text) < FRAGMENT:
        return text
    grams = {piece[i : i + FRAGMENT] for piece in pieces for i in range(len(piece) - FRAGMENT + 1)}
    lowered = text.lower()
    covered = bytearray(len(text))
    for start in range(len(text) - FRAGMENT + 1):
        if lowered[start : start + FRAGMENT] in grams:
            covered[start : start + FRAGMENT] = b"\x01" * FRAGMENT
    if not any(covered):
        return text
    out, index = [], 0
    while index < len(text):
        if covered[index]:
            while index < len(text) and covered[index]:
                index += 1
            out.append(REDACTED)
        else:
            out.append(text[index])
            index += 1
    return "".join(out)


def _cut_tail(text: str, secret: str) -> str:
    """An upstream that truncates its echo leaves the credential's first characters at the end of the text."""
    window = text[-(len(secret) - 1) :] if len(secret) > 1 else ""
    head = secret[:MIN_TAIL]
    if len(secret) <= MIN_TAIL or head not in window:
        return text
    index = window.find(head)
    while index != -1:
        if secret.startswith(window[index:]):
            return text[: len(text) - len(window) + index] + REDACTED
        index = window.find(head, index + 1)
    return text


def _redact_token(match: re.Match) -> str:
    token = match.group(3)
    if not any(c.isdigit() for c in token) or token.startswith("[") or REDACTED in token:
        return match.group(0)
    return match.group(1) + match.group(2) + REDACTED


def scrub_error(error, secrets: Iterable[str]):
    """The UpstreamError with its upstream-derived text scrubbed (in place; returned for `raise`)."""
    secrets = tuple(secrets)
    try:
        error.message = scrub(str(error.message or ""), secrets)
        if error.provider_code:
            error.provider_code = scrub(str(error.provider_code), secrets)[:200]
    except Exception:  # never let scrubbing fail the request; never let unscrubbed text through either
        error.message, error.provider_code = "Provider returned error", None
    return error
