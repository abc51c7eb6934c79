"""Credentials out of upstream text in the forms an upstream may echo them: base64 (standard and URL-safe, padded
or not, at each of the three byte alignments inside a longer base64 string), hex, percent-encoding, and split by
whitespace or separators; and upstream identifiers (its response id, model, service tier) stored and shown only
when they are short tokens that carry no credential. Also the forms that only look alike once the text is read as
characters (Unicode normalisation, invisible characters, JSON escapes, a key spelled out as an array)."""

import base64
import binascii
import json
import re
import unicodedata
from urllib.parse import quote, unquote

import pytest

from routing.canonical import CanonicalResponse, Finished, OutputMessage
from routing.redact import (
    MAX_MESSAGE,
    MAX_SCAN,
    REDACTED,
    UPSTREAM_ID,
    Secrets,
    request_secrets,
    scrub,
    scrub_event,
    scrub_response,
    scrub_token,
)

SECRET = "sk-proj-Q7vT2mXw9LkR4pZs8NcY1bHd6FgJ3qUe"
WINDOW = 12  # no run of this many bytes of the secret may survive, in any form


def windows(secret: str) -> set[bytes]:
    raw = secret.encode()
    return {raw[i : i + WINDOW] for i in range(len(raw) - WINDOW + 1)}


def decodings(text: str) -> list[bytes]:
    """Everything the text could be read as: itself, percent-decoded, without separators, and the base64 and
    hex decodings of its runs at every offset."""
    out = [text.encode(), unquote(text).encode(), re.sub(r"[\s.\-]", "", text).encode()]
    for run in re.findall(r"[A-Za-z0-9+/_\-=]{8,}", text):
        for shift in range(4):
            part = run[shift:].rstrip("=")
            part = part[: len(part) - len(part) % 4]
            for alphabet in (None, b"-_"):
                try:
                    out.append(base64.b64decode(part, altchars=alphabet))
                except (binascii.Error, ValueError):
                    pass
    for run in re.findall(r"[0-9A-Fa-f]{8,}", text):
        for shift in range(2):
            part = run[shift:]
            out.append(bytes.fromhex(part[: len(part) - len(part) % 2]))
    return out


def leaks(text: str, secret: str = SECRET) -> bool:
    pieces = windows(secret) | windows(re.sub(r"[\s.\-]", "", secret))
    return any(piece in decoded for decoded in decodings(text) for piece in pieces)


def b64(data: bytes, *, urlsafe: bool = False, padded: bool = True) -> str:
    encoded = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()
    return encoded if padded else encoded.rstrip("=")


def spaced(secret: str, separator: str, every: int) -> str:
    return separator.join(secret[i : i + every] for i in range(0, len(secret), every))


ECHOES = {
    "base64": b64(SECRET.encode()),
    "base64 unpadded": b64(SECRET.encode(), padded=False),
    "base64 urlsafe": b64(SECRET.encode(), urlsafe=True),
    "base64 urlsafe unpadded": b64(SECRET.encode(), urlsafe=True, padded=False),
    # inside a longer base64 string (a Basic header, a JSON blob), at each of the three byte alignments
    **{
        f"base64 inside, alignment {k}": b64(b"Authorization: Bearer "[: 20 + k] + SECRET.encode() + b'"}trailer')
        for k in range(3)
    },
    **{
        f"base64 urlsafe inside, alignment {k}": b64(b'{"api_key": "'[: 11 + k] + SECRET.encode() + b"..", urlsafe=True)
        for k in range(3)
    },
    "hex": SECRET.encode().hex(),
    "HEX": SECRET.encode().hex().upper(),
    "percent, every byte": "".join(f"%{b:02X}" for b in SECRET.encode()),
    "percent, lower case": "".join(f"%{b:02x}" for b in SECRET.encode()),
    "percent, mixed": quote(SECRET[:10], safe="") + "".join(f"%{b:02X}" for b in SECRET[10:].encode()),
    "spaces every 4": spaced(SECRET, " ", 4),
    "newlines every 8": spaced(SECRET, "\n", 8),
    "dashes between characters": "-".join(SECRET),
    "dots every 5": spaced(SECRET, ".", 5),
    "mixed separators": spaced(SECRET[:20], " - ", 3) + "\n" + spaced(SECRET[20:], ". ", 4),
}


@pytest.mark.parametrize("form", ECHOES)
def test_an_encoded_echo_of_a_credential_is_scrubbed(form):
    # Given an upstream error that echoes the key it was sent, encoded
    echoed = ECHOES[form]
    assert leaks(echoed), "the test's own decoder must see the key in the echo"
    text = f"Invalid credentials (received {echoed}); check your configuration."
    # When it is scrubbed of the attempt's secrets
    scrubbed = scrub(text, [SECRET])
    # Then no run of the key is left in any of its forms, and the prose around it is
    assert not leaks(scrubbed), scrubbed
    assert REDACTED in scrubbed
    assert scrubbed.startswith("Invalid credentials (received ") and scrubbed.endswith("check your configuration.")


def test_prose_and_unrelated_encodings_are_left_alone():
    image = b64(bytes(range(256)) * 4)
    text = f"The model is over capacity - please retry. Data: {image} id 0a1b2c3d4e5f60718293a4b5c6d7e8f9 ok."
    assert scrub(text, [SECRET]) == text[:MAX_MESSAGE]


def test_the_work_is_bounded_to_a_prefix_of_the_text():
    # A huge text (near-matches everywhere: the secret's characters with separators, its base64 alphabet) is
    # scrubbed from its first MAX_SCAN characters only: what the message keeps lies within them.
    huge = ("s-k-p r o.j " + SECRET[:9] + "-" + b64(SECRET.encode()[:20]) + " ") * (4 * MAX_SCAN // 60)
    assert len(huge) > 3 * MAX_SCAN
    assert scrub(huge, [SECRET]) == scrub(huge[:MAX_SCAN], [SECRET])
    assert len(scrub(huge, [SECRET])) <= MAX_MESSAGE


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("chatcmpl-9xYz012345abcdef", True),
        ("msg_01XFDUDYJgAACzvnptvVoYEL", True),
        ("resp_67cc:eu.1", True),
        (SECRET, False),  # the credential itself
        ("x" + SECRET[3:20], False),  # a run of it
        (b64(SECRET.encode(), urlsafe=True, padded=False), False),  # encoded
        ("sk-ant-api03-abcdefghijklmnop", False),  # shaped like a key
        ("a" * 129, False),  # too long
        ("id\nSet-Cookie: x", False),  # not a token
        ("<script>alert(1)</script>", False),
        ("", False),
        (None, False),
        (12345, False),
    ],
)
def test_an_upstream_identifier_is_kept_only_as_a_short_clean_token(value, kept):
    assert scrub_token(value, [SECRET]) == (value if kept else None)
    if isinstance(value, str) and UPSTREAM_ID.fullmatch(value):  # the token check agrees with scrub
        assert (scrub(value, [SECRET]) == value) == kept


@pytest.mark.parametrize("form", [form for form in ECHOES.values() if UPSTREAM_ID.fullmatch(form)])
def test_an_identifier_that_is_an_encoded_echo_is_dropped(form):
    assert scrub_token(form, [SECRET]) is None


def test_a_stop_sequence_the_upstream_names_is_kept_only_without_a_credential():
    # Given answers whose upstream names the stop sequence that ended them: one of the caller's, or the key
    clean = CanonicalResponse(output=(OutputMessage(text="Hi", stop_sequence="\n\nUser:"),))
    echoed = CanonicalResponse(output=(OutputMessage(text="Hi", stop_sequence=f"stop {SECRET}"),))
    # Then the caller's is kept and the echo dropped, in an answer as in a stream's last event
    assert scrub_response(clean, [SECRET]).output[0].stop_sequence == "\n\nUser:"
    assert scrub_response(echoed, [SECRET]).output[0].stop_sequence is None
    assert scrub_event(Finished(stop_sequence="\n\nUser:"), Secrets([SECRET])).stop_sequence == "\n\nUser:"
    assert scrub_event(Finished(stop_sequence=b64(SECRET.encode())), Secrets([SECRET])).stop_sequence is None


# A key with underscores of its own: `_` between an echo's characters is a separator, and the key's own are not lost.
UNDERSCORED = "sk_live_51Hq8ZpL2mXw9KkR4pZs8NcY1bHd6F"


def fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def json_escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


def read_as_characters(text: str) -> str:
    """The letters and digits a reader sees: JSON escapes decoded, NFKC applied, everything else dropped."""
    text = re.sub(r"\\u([0-9A-Fa-f]{4})", lambda m: chr(int(m[1], 16)), text)
    return "".join(c for c in unicodedata.normalize("NFKC", text) if c.isascii() and c.isalnum())


def readable(text: str, secret: str) -> bool:
    plain, key = read_as_characters(text), read_as_characters(secret)
    return any(key[i : i + WINDOW] in plain for i in range(len(key) - WINDOW + 1))


CHARACTER_ECHOES = {
    **{
        f"U+{ord(mark):04X} between characters": mark.join
        for mark in ("\u200b", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u180e")
    },
    "underscores between characters": "_".join,
    "pipes between characters": "|".join,
    "a JSON array of its characters": lambda key: json.dumps(list(key)),
    "a Python list of its characters": lambda key: str(list(key)),
    "JSON escapes of its characters": json_escaped,
    "JSON escapes, inside a JSON string": lambda key: json.dumps({"key": fullwidth(key)}),
    "JSON escapes of half its characters": lambda key: "".join(
        json_escaped(c) if i % 2 else c for i, c in enumerate(key)
    ),
    "fullwidth letters": fullwidth,
    "fullwidth letters, spaced by ideographic spaces": lambda key: "\u3000".join(fullwidth(key)),
    "mathematical letters": lambda key: "".join(
        chr(0x1D5A0 + ord(c) - ord("A"))
        if "A" <= c <= "Z"
        else chr(0x1D5BA + ord(c) - ord("a"))
        if "a" <= c <= "z"
        else c
        for c in key
    ),
    "quoted, escaped and backslashed": lambda key: "\\".join(f"'{c}'" for c in key),
}


@pytest.mark.parametrize("secret", [SECRET, UNDERSCORED], ids=["key", "key with underscores"])
@pytest.mark.parametrize("form", CHARACTER_ECHOES)
def test_an_echo_that_reads_as_the_credential_is_scrubbed(form, secret):
    # Given an upstream error that echoes the key so that it reads as the key once its characters are read
    echoed = CHARACTER_ECHOES[form](secret)
    assert readable(echoed, secret), "the test's own reader must see the key in the echo"
    text = f"Invalid credentials (received {echoed}); check your configuration."
    # When it is scrubbed of the attempt's secrets
    scrubbed = scrub(text, [secret])
    # Then no run of the key can be read in it, and the prose around it is kept
    assert not readable(scrubbed, secret), scrubbed
    assert scrubbed.startswith("Invalid credentials (received ") and scrubbed.endswith("; check your configuration.")


@pytest.mark.parametrize(
    "echo",
    [fullwidth(SECRET), "\u200b".join(SECRET), json_escaped(SECRET), "_".join(SECRET), fullwidth(UNDERSCORED)],
    ids=["fullwidth", "zero-width spaces", "JSON escapes", "underscores", "fullwidth, key with underscores"],
)
def test_what_is_removed_is_the_echo_as_it_was_written(echo):
    # The match is found in the text read as characters, and mapped back to the characters that were written.
    secret = UNDERSCORED if "ｌｉｖｅ" in echo else SECRET
    assert scrub(f"received {echo} - retry", [secret]) == f"received {REDACTED} - retry"


def test_characters_whose_lower_case_is_longer_do_not_shift_what_is_removed():
    # "İ".lower() is two characters: a text full of them must not move the redaction off the key's hex.
    text = "İ" * 40 + " " + SECRET.encode().hex() + " ok"
    assert scrub(text, [SECRET]) == "İ" * 40 + " " + REDACTED + " ok"


def test_prose_in_other_scripts_and_with_invisible_characters_is_left_alone():
    text = 'Ｌｅ modèle est surchargé\u200b — réessayez. 模型过载，请稍后重试。 İstanbul_ofisi | ["a", "b"]'
    assert scrub(text, [SECRET, UNDERSCORED]) == text


def test_the_work_on_characters_is_bounded_to_a_prefix_of_the_text():
    near = "\u200b".join(fullwidth(SECRET[:9])) + json_escaped(SECRET[9:16]) + "_".join(SECRET[16:24]) + " "
    huge = near * (4 * MAX_SCAN // len(near))
    assert len(huge) > 3 * MAX_SCAN
    assert scrub(huge, [SECRET]) == scrub(huge[:MAX_SCAN], [SECRET])


def test_the_forms_of_the_same_secrets_are_built_once_per_process():
    # Each attempt builds its Secrets anew from the request it sends; what scrubbing looks for is built once for the
    # same secrets (a small bounded cache), and separately for any other secrets.
    def attempt(key: str) -> Secrets:
        return request_secrets(url="https://api.example.com/v1/responses", headers={"Authorization": f"Bearer {key}"})

    first, second, other = attempt(SECRET), attempt(SECRET), attempt(UNDERSCORED)
    assert first is not second and first == second
    assert first.forms is second.forms
    assert other.forms is not first.forms
    assert scrub(f"received {fullwidth(UNDERSCORED)}", other) == f"received {REDACTED}"
