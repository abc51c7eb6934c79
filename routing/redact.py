"""Credentials out of upstream text. An upstream may echo what it was sent (an `Authorization` header in an
error body, a key in an in-band stream error, its response id), and what it says reaches the client, the logs and
the generation records. routing.upstream scrubs every UpstreamError leaving an attempt with `scrub_error`, and the
identifiers of its answers (response id, model, service tier) with `scrub_response` / `scrub_event`: each
credential sent on that attempt is removed verbatim and in the forms an echo may take (base64, standard or
URL-safe, at any byte alignment inside a longer base64 string; hex; percent-encoded or JSON-escaped, wholly or in
part; in look-alike characters NFKC folds to it (fullwidth, mathematical letters); split by whitespace, separators
or invisible characters, or spelled out as an array of its characters; its first characters at the end of a cut
text), and so is anything shaped like a key
(`sk-...`, `AKIA...`, `Bearer ...`, a JWT, a PEM private key, a long token after a word like "key" or "token").
Ordinary prose is left alone. The work is linear in the text, and only its first MAX_SCAN characters are read
(the message keeps fewer)."""

import binascii
import functools
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

from routing.canonical import CanonicalResponse, Finished, OutputMessage, ResponseStarted
from routing.errors import UpstreamError

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
# Between the characters of an echoed credential: whitespace, the separators people and tools insert, and what a
# JSON or Python array of its characters puts between them (quotes, brackets, backslashes). Also every ASCII control
# character, and every non-ASCII character that is invisible or blank (Unicode categories C*, Z*, and combining
# marks: a zero-width space, a soft hyphen, a BOM). The view removes them from the text and from the secrets alike,
# so a secret's own underscores (or dashes) are no obstacle: "sk_live_x" is looked for as "sklivex".
SEPARATORS = frozenset(" \t\r\n\f\v-.:,_|\"'[]\\")
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
# Any of them, for a yes/no search (each alternative with its own flags).
_ANY_SHAPE = re.compile(
    "|".join(
        f"(?{'s' if p.flags & re.DOTALL else ''}{'i' if p.flags & re.IGNORECASE else ''}:{p.pattern})"
        if p.flags & (re.DOTALL | re.IGNORECASE)
        else f"(?:{p.pattern})"
        for p, _ in _SHAPES
    )
)
# A long token (with at least one digit, so words are not mistaken for it) after a credential word.
_AFTER_WORD = re.compile(
    r"(?i)\b((?:api[-_ ]?)?keys?|tokens?|secrets?|passwords?|signatures?|credentials?|authorization|auth)"
    r"(\s*[\"']?\s*[:=]?\s*[\"']?\s*)([A-Za-z0-9+/_.\-]{16,}=*)"
)


def request_secrets(*, url: str, headers: dict[str, str], extra: Iterable[str] = ()) -> tuple[str, ...]:
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
    # In a set order (by length, then value): an attempt with the same credentials has the same Secrets (_forms_of).
    return Secrets(sorted({v for v in values if isinstance(v, str) and v.strip()}, key=lambda v: (-len(v), v)))


class Secrets(tuple[str, ...]):
    """An attempt's secrets, with what scrubbing looks for built once from them (`forms`): an attempt scrubs its
    answer's identifiers and each of its stream's events with the same Secrets. Its repr shows none of them."""

    _forms: "_Forms | None" = None

    def __repr__(self) -> str:
        return f"Secrets(<{len(self)} masked>)"

    @property
    def forms(self) -> "_Forms":
        if self._forms is None:
            self._forms = _forms_of(tuple(self))
        return self._forms


# Building the forms costs ~30 us for one long key, and every attempt (with the same few credentials, mostly) builds
# its Secrets anew. Memoized per process by the exact secrets, in order. This keeps the plaintext of the last
# FORMS_CACHE_SIZE attempts' credentials (and their encoded forms) in this process's memory after the attempts end:
# bounded, never written anywhere, and the same process holds those credentials to send them anyway.
FORMS_CACHE_SIZE = 32


@functools.lru_cache(maxsize=FORMS_CACHE_SIZE)
def _forms_of(secrets: tuple[str, ...]) -> "_Forms":
    return _Forms(secrets)


class _Forms:
    """The encoded forms of the long secrets (case-sensitive, and lower-case) and the FRAGMENT-character runs of
    the long secrets' pieces, all with separators left out."""

    __slots__ = ("exact", "folded", "grams", "quoted")

    def __init__(self, secrets: tuple[str, ...]):
        # The plain view decodes percent-escapes byte by byte: the percent-encoded form of a short or non-ASCII
        # secret is replaced as a string of its own.
        self.quoted = tuple(
            quote(secret, safe="", errors="replace") if len(secret) < MIN_ENCODED or not secret.isascii() else ""
            for secret in secrets
        )
        long_secrets = [secret for secret in secrets if len(secret) >= MIN_ENCODED]
        # A secret holding another ("Bearer <key>") adds no form: every echo of it holds one of the other's.
        distinct = [s for s in long_secrets if not any(other != s and other in s for other in long_secrets)]
        self.exact: list[str] = []
        self.folded: list[str] = []
        for secret in distinct:
            exact, folded = encoded_forms(secret)
            self.exact += exact
            self.folded += folded
        pieces = {_plain(piece)[1] for secret in distinct for piece in _PIECE_SPLIT.split(secret)}
        self.grams = frozenset(
            piece[i : i + FRAGMENT]
            for piece in pieces
            if len(piece) >= MIN_FRAGMENT_SECRET
            for i in range(len(piece) - FRAGMENT + 1)
        )


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    if not text:
        return text
    text = text[:MAX_SCAN]
    if not isinstance(secrets, Secrets):
        secrets = Secrets(secrets)
    text = _cut_secrets(text, secrets.forms)
    for secret, quoted in zip(secrets, secrets.forms.quoted, strict=True):
        if len(secret) < MIN_EXACT:
            text = re.sub(rf"(?<![A-Za-z0-9_\-]){re.escape(secret)}(?![A-Za-z0-9_\-])", REDACTED, text)
            continue
        text = text.replace(secret, REDACTED)
        if quoted and quoted != secret:
            text = text.replace(quoted, REDACTED)
        text = _cut_tail(text, secret)
    for pattern, replacement in _SHAPES:
        text = pattern.sub(replacement, text)
    text = _AFTER_WORD.sub(_redact_token, text)
    return text[:MAX_MESSAGE]


def encoded_forms(secret: str) -> tuple[list[str], list[str]]:
    """(case-sensitive forms, lower-case forms) of a credential as an echo may carry it: itself, its hex, and the
    characters of its base64 (standard and URL-safe) that depend on it alone, for each of the three byte
    alignments it may have inside a longer base64 string (padding is never among them). Each form is read as the
    text it is looked for in is (`_plain_view`: separators left out, look-alikes folded)."""
    raw = secret.encode(errors="surrogatepass")  # a lone surrogate (a key that could not be sent) must not raise
    forms = [_plain(secret)[0]]
    for offset in range(3):
        encoded = binascii.b2a_base64(b"\0" * offset + raw + b"\0\0", newline=False).decode()
        # character i holds bits [6i, 6i + 6): it depends on the secret alone when they lie within its bits
        core = encoded[-(-8 * offset // 6) : 8 * (offset + len(raw)) // 6]
        forms += [core, core.translate(_URLSAFE).translate(_DROP_SEPARATORS)]  # '-_' are separators, '+/' not
    return [form for form in forms if len(form) >= MIN_ENCODED], [raw.hex()]


_URLSAFE = str.maketrans("+/", "-_")
_PIECE_SPLIT = re.compile(r"[/\s]+")
_ASCII_SEPARATORS = "".join(sorted(SEPARATORS)) + "".join(map(chr, range(32))) + "\x7f"
_DROP_SEPARATORS = str.maketrans("", "", _ASCII_SEPARATORS)
_RUN_SEPARATORS = re.escape(_ASCII_SEPARATORS.replace("\\", ""))  # a backslash may start an escape: one at a time
# What the view reads, in order: a percent-escape; a JSON escape of a character (\u0073) or of whitespace (\n); a run
# of plain ASCII characters (neither separators nor '%'); a run of ASCII separators, or a backslash; one non-ASCII
# character; a lone '%'. Every match is a run or at most 6 characters: the loop over them is linear in the text.
_VIEW = re.compile(
    r"%[0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4}|\\[bfnrt]|"
    rf"([^%\x80-\U0010ffff{re.escape(_ASCII_SEPARATORS)}]+)|[{_RUN_SEPARATORS}]+|\\|([^\x00-\x7f])|%"
)
MAX_FOLD = 4  # characters one character may fold to ("㎏" -> "kg")
FOLD_CACHE_SIZE = 4096  # distinct non-ASCII characters whose folded form is kept (the view reads one at a time)


def _cut_secrets(text: str, forms: "_Forms") -> str:
    """Read as its characters (`_plain_view`: "s k-p r", "sk%2Dpr", "s\\u006b", "ｓｋ"), the text loses:
    - every credential at least MIN_ENCODED long, in any of its `encoded_forms` ("c2stcHJ", "736b2d70");
    - any run of FRAGMENT or more characters (any case) of a long credential, wherever it is: an upstream that
      echoes half a key ("sk-abc...") or its tail ("...xyz123") leaks part of it. Credentials are split on '/'
      and whitespace first, so the non-secret parts of structured values (a SigV4 scope: date, region,
      service) are not used.
    Each form is found with str.find and each run with a set lookup per position: linear in the text."""
    if not forms.exact or len(text) < MIN_ENCODED:
        return text
    plain, starts, ends = _plain_view(text)
    lowered = _lower(plain)
    covered = bytearray(len(text))

    def cover(begin: int, end: int) -> None:  # plain[begin:end], in the text
        covered[starts[begin] : ends[end - 1]] = b"\x01" * (ends[end - 1] - starts[begin])

    for haystack, found in ((plain, forms.exact), (lowered, forms.folded)):
        for form in found:
            index = haystack.find(form)
            while index != -1:
                cover(index, index + len(form))
                index = haystack.find(form, index + 1)
    if forms.grams:
        for start in range(len(lowered) - FRAGMENT + 1):
            if lowered[start : start + FRAGMENT] in forms.grams:
                cover(start, start + FRAGMENT)
    return _redact_covered(text, covered)


def _plain_view(text: str) -> tuple[str, list[int], list[int]]:
    """The text as its characters read: without separators, with %XX and JSON's \\uXXXX decoded, and each other
    character folded by NFKC (fullwidth and mathematical letters to ASCII ones); and for each character of that
    view, where it starts and ends in the text, so a match is removed as it was written. Runs of plain ASCII
    characters are taken whole (the loop is per run, not per character); a non-ASCII character is folded on its
    own (NFKC of one character, cached; at most MAX_FOLD characters), so each character of the view has one span."""
    parts: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for match in _VIEW.finditer(text):
        begin, end = match.span()
        run = match.group(1)
        if run is not None:
            starts.extend(range(begin, end))
            ends.extend(range(begin + 1, end + 1))
            parts.append(run)
            continue
        part = match.group()
        if match.group(2) is not None:
            part = _fold(part)
        elif part[0] == "%" and len(part) == 3:
            part = _fold(chr(int(part[1:], 16)))
        elif part[0] == "\\" and len(part) == 6:
            part = _fold(chr(int(part[2:], 16)))
        elif part != "%":  # separators, and JSON's escapes of whitespace
            continue
        if part:
            starts.extend([begin] * len(part))
            ends.extend([end] * len(part))
            parts.append(part)
    return "".join(parts), starts, ends


@functools.lru_cache(maxsize=FOLD_CACHE_SIZE)
def _fold(char: str) -> str:
    """One character as the view reads it: NFKC, less separators and invisible characters. A character NFKC spells
    with more than MAX_FOLD characters (U+FDFA: 18) is no look-alike of a key's: it is kept as it is, so the view
    is at most MAX_FOLD times the text read."""
    folded = unicodedata.normalize("NFKC", char)
    if len(folded) > MAX_FOLD:
        return char
    return "".join(c for c in folded if not _is_separator(c))


def _is_separator(char: str) -> bool:
    if char.isascii():
        return char in _ASCII_SEPARATORS
    category = unicodedata.category(char)
    return category[0] in "CZ" or category in ("Mn", "Me")


def _lower(plain: str) -> str:
    """The view in lower case, character for character (str.lower turns some characters into two: "İ")."""
    lowered = plain.lower()
    if len(lowered) == len(plain):
        return lowered
    return "".join(low if len(low := c.lower()) == 1 else c for c in plain)


def _plain(text: str) -> tuple[str, str]:
    """The view of a secret (or a piece of one), and in lower case."""
    plain = _plain_view(text)[0]
    return plain, _lower(plain)


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


def _redact_token(match: re.Match[str]) -> str:
    token = match.group(3)
    if not any(c.isdigit() for c in token) or token.startswith("[") or REDACTED in token:
        return match.group(0)
    return match.group(1) + match.group(2) + REDACTED


def scrub_error(error: UpstreamError, secrets: Iterable[str]) -> UpstreamError:
    """The UpstreamError with its upstream-derived text scrubbed (in place; returned for `raise`)."""
    secrets = secrets if isinstance(secrets, Secrets) else Secrets(secrets)
    try:
        error.message = scrub(str(error.message or ""), secrets)
        if error.provider_code:
            error.provider_code = scrub(str(error.provider_code), secrets)[:200]
    except Exception:  # never let scrubbing fail the request; never let unscrubbed text through either
        error.message, error.provider_code = "Provider returned error", None
    return error


def scrub_token(value: Any, secrets: Iterable[str], *, shape: re.Pattern[str] = UPSTREAM_ID) -> str | None:
    """An upstream-provided identifier (its response id, model, service tier), as the gateway may store and show
    it: None unless it is a short token of plain characters in which scrubbing finds nothing."""
    if not isinstance(value, str) or not shape.fullmatch(value):
        return None
    try:
        return None if _token_leaks(value, secrets if isinstance(secrets, Secrets) else Secrets(secrets)) else value
    except Exception:  # never let scrubbing fail the request; never keep what could not be checked
        return None


def _token_leaks(token: str, secrets: Secrets) -> bool:
    """Whether `scrub` would change a token (ASCII, no '%' or '\\': its plain view is itself without separators),
    found by searching rather than replacing: an answer's identifiers are checked on every request."""
    forms = secrets.forms
    plain = token.translate(_DROP_SEPARATORS)
    lowered = plain.lower()
    if any(form in plain for form in forms.exact) or any(form in lowered for form in forms.folded):
        return True
    grams = forms.grams
    if grams and any(lowered[i : i + FRAGMENT] in grams for i in range(len(lowered) - FRAGMENT + 1)):
        return True
    for secret in secrets:
        if len(secret) < MIN_EXACT:
            if re.search(rf"(?<![A-Za-z0-9_\-]){re.escape(secret)}(?![A-Za-z0-9_\-])", token):
                return True
        elif secret in token or _cut_tail(token, secret) != token:
            return True
    if _ANY_SHAPE.search(token):
        return True
    return any(_redact_token(match) != match.group(0) for match in _AFTER_WORD.finditer(token))


def scrub_stop_sequence(value: str | None, secrets: Iterable[str]) -> str | None:
    """The stop sequence an upstream says ended the answer (meant to be one of the caller's, shown on /messages):
    None when scrubbing would change it."""
    if value is None:
        return None
    try:
        return value if len(value) <= MAX_MESSAGE and scrub(value, secrets) == value else None
    except Exception:  # never let scrubbing fail the request; never keep what could not be checked
        return None


def scrub_response(response: CanonicalResponse, secrets: Iterable[str]) -> CanonicalResponse:
    """The answer with its upstream identifiers (and any stop sequence it names) kept only when clean."""
    secrets = secrets if isinstance(secrets, Secrets) else Secrets(secrets)
    output = response.output
    if any(isinstance(item, OutputMessage) and item.stop_sequence is not None for item in output):
        output = tuple(
            replace(item, stop_sequence=scrub_stop_sequence(item.stop_sequence, secrets))
            if isinstance(item, OutputMessage) and item.stop_sequence is not None
            else item
            for item in output
        )
    return replace(
        response,
        output=output,
        upstream_id=scrub_token(response.upstream_id, secrets),
        model=scrub_token(response.model, secrets, shape=UPSTREAM_MODEL),
        service_tier=scrub_token(response.service_tier, secrets),
    )


def scrub_event(event: Any, secrets: Iterable[str]) -> Any:
    """A stream event with the upstream identifiers (and stop sequence) it carries kept only when clean; others as
    they are."""
    if isinstance(event, ResponseStarted):
        return replace(
            event,
            upstream_id=scrub_token(event.upstream_id, secrets),
            model=scrub_token(event.model, secrets, shape=UPSTREAM_MODEL),
        )
    if isinstance(event, Finished) and (event.service_tier is not None or event.stop_sequence is not None):
        return replace(
            event,
            service_tier=scrub_token(event.service_tier, secrets),
            stop_sequence=scrub_stop_sequence(event.stop_sequence, secrets),
        )
    return event
