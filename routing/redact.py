"""Credentials out of upstream text. An upstream may echo what it was sent (an `Authorization` header in an
error body, a key in an in-band stream error, its response id), and what it says reaches the client, the logs and
the generation records. routing.upstream scrubs every UpstreamError leaving an attempt with `scrub_error`, and the
identifiers of its answers (response id, model, service tier) with `scrub_response` / `scrub_event`: each
credential sent on that attempt is removed verbatim and in the forms an echo may take (base64, standard or
URL-safe, at any byte alignment inside a longer base64 string; hex; percent-encoded, wholly or in part; split by
whitespace or separators; its first characters at the end of a cut text), and so is anything shaped like a key
(`sk-...`, `AKIA...`, `Bearer ...`, a JWT, a PEM private key, a long token after a word like "key" or "token").
Ordinary prose is left alone. The work is linear in the text, and only its first MAX_SCAN characters are read
(the message keeps fewer)."""

import base64
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

from routing.canonical import CanonicalResponse, Finished, ResponseStarted

# Request headers whose values are credentials.
SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "x-amz-security-token", "cookie"}
)
REDACTED = "[redacted]"
MAX_MESSAGE = 2000  # characters of upstream text kept
# Characters of upstream text read (bounding the work on a large body): the MAX_MESSAGE kept lie within them
# unless redactions shrink them 16-fold, and a credential cut at the end loses its tail there too (_cut_tail).
MAX_SCAN = 16 * MAX_MESSAGE
MIN_ENCODED = 8  # credentials at least this long are also looked for encoded and split by separators
# Between the characters of an echoed credential: whitespace and the separators people and tools insert.
SEPARATORS = frozenset(" \t\r\n\f\v-.:,")
# An upstream's identifiers as the gateway stores and shows them: short tokens of plain characters.
UPSTREAM_ID = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")
UPSTREAM_MODEL = re.compile(r"[A-Za-z0-9_.:/@+\-]{1,128}")
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
    text = text[:MAX_SCAN]
    secrets = tuple(secrets)
    text = _cut_secrets(text, secrets)
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


def encoded_forms(secret: str) -> tuple[list[str], list[str]]:
    """(case-sensitive forms, lower-case forms) of a credential as an echo may carry it: itself, its hex, and the
    characters of its base64 (standard and URL-safe) that depend on it alone, for each of the three byte
    alignments it may have inside a longer base64 string (padding is never among them). Separators are left out
    of every form, as they are of the text they are looked for in."""
    raw = secret.encode(errors="surrogatepass")  # a lone surrogate (a key that could not be sent) must not raise
    exact = [secret]
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw + b"\0\0").decode()
        # character i holds bits [6i, 6i + 6): it depends on the secret alone when they lie within its bits
        core = encoded[-(-8 * offset // 6) : 8 * (offset + len(raw)) // 6]
        exact += [core, core.translate(_URLSAFE)]
    forms = ["".join(c for c in form if c not in SEPARATORS) for form in exact]
    return [form for form in forms if len(form) >= MIN_ENCODED], [raw.hex()]


_URLSAFE = str.maketrans("+/", "-_")
_HEX = frozenset("0123456789abcdefABCDEF")


def _cut_secrets(text: str, secrets: tuple[str, ...]) -> str:
    """Read with its separators skipped and its percent-escapes decoded ("s k-p r", "sk%2Dpr"), the text loses:
    - every credential at least MIN_ENCODED long, in any of its `encoded_forms` ("c2stcHJ", "736b2d70");
    - any run of FRAGMENT or more characters (any case) of a long credential, wherever it is: an upstream that
      echoes half a key ("sk-abc...") or its tail ("...xyz123") leaks part of it. Credentials are split on '/'
      and whitespace first, so the non-secret parts of structured values (a SigV4 scope: date, region,
      service) are not used.
    Each form is found with str.find and each run with a set lookup per position: linear in the text."""
    long_secrets = [secret for secret in secrets if len(secret) >= MIN_ENCODED]
    if not long_secrets or len(text) < MIN_ENCODED:
        return text
    plain, starts, ends = _plain_view(text)
    lowered = plain.lower()
    covered = bytearray(len(text))

    def cover(begin: int, end: int) -> None:  # plain[begin:end], in the text
        covered[starts[begin] : ends[end - 1]] = b"\x01" * (ends[end - 1] - starts[begin])

    for secret in long_secrets:
        exact, folded = encoded_forms(secret)
        for haystack, forms in ((plain, exact), (lowered, folded)):
            for form in forms:
                index = haystack.find(form)
                while index != -1:
                    cover(index, index + len(form))
                    index = haystack.find(form, index + 1)
    pieces = {
        "".join(c for c in piece if c not in SEPARATORS).lower()
        for secret in secrets
        for piece in re.split(r"[/\s]+", secret)
    }
    grams = {
        piece[i : i + FRAGMENT]
        for piece in pieces
        if len(piece) >= MIN_FRAGMENT_SECRET
        for i in range(len(piece) - FRAGMENT + 1)
    }
    if grams:
        for start in range(len(lowered) - FRAGMENT + 1):
            if lowered[start : start + FRAGMENT] in grams:
                cover(start, start + FRAGMENT)
    return _redact_covered(text, covered)


def _plain_view(text: str) -> tuple[str, list[int], list[int]]:
    """The text without separators and with %XX decoded, and for each of its characters where it starts and
    ends in the text."""
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    index, length = 0, len(text)
    while index < length:
        char, step = text[index], 1
        if char == "%" and index + 3 <= length and _HEX.issuperset(text[index + 1 : index + 3]):
            char, step = chr(int(text[index + 1 : index + 3], 16)), 3
        if char not in SEPARATORS:
            chars.append(char)
            starts.append(index)
            ends.append(index + step)
        index += step
    return "".join(chars), starts, ends


def _redact_covered(text: str, covered: bytearray) -> str:
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


def scrub_token(value: Any, secrets: Iterable[str], *, shape: re.Pattern = UPSTREAM_ID) -> str | None:
    """An upstream-provided identifier (its response id, model, service tier), as the gateway may store and show
    it: None unless it is a short token of plain characters in which scrubbing finds nothing."""
    if not isinstance(value, str) or not shape.fullmatch(value):
        return None
    try:
        return value if scrub(value, secrets) == value else None
    except Exception:  # never let scrubbing fail the request; never keep what could not be checked
        return None


def scrub_response(response: CanonicalResponse, secrets: Iterable[str]) -> CanonicalResponse:
    """The answer with its upstream identifiers kept only when clean (scrub_token)."""
    secrets = tuple(secrets)
    return replace(
        response,
        upstream_id=scrub_token(response.upstream_id, secrets),
        model=scrub_token(response.model, secrets, shape=UPSTREAM_MODEL),
        service_tier=scrub_token(response.service_tier, secrets),
    )


def scrub_event(event: Any, secrets: tuple[str, ...]) -> Any:
    """A stream event with the upstream identifiers it carries kept only when clean; others as they are."""
    if isinstance(event, ResponseStarted):
        return replace(
            event,
            upstream_id=scrub_token(event.upstream_id, secrets),
            model=scrub_token(event.model, secrets, shape=UPSTREAM_MODEL),
        )
    if isinstance(event, Finished) and event.service_tier is not None:
        return replace(event, service_tier=scrub_token(event.service_tier, secrets))
    return event
