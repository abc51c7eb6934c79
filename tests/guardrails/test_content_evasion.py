"""Look-alike spellings: filters match on the folded view of a text (no zero-width or format characters, NFKC
forms), while block, flag and redact act on the caller's own characters; and the windowed scan finds exactly
what whole passes over the text find."""

import random

import pytest

from guardrails import scan as re2_scan
from guardrails import textview
from guardrails.policy import policy_for
from guardrails.textview import text_view

PROJECT = [{"pattern": r"(?i)\bproject\s+kestrel\b", "action": "block", "label": "codename"}]
PASSWORD = [{"pattern": r"(?i)password\s*[:=]\s*\S+", "action": "redact", "label": "password"}]
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"]


def fullwidth(text: str) -> str:
    return "".join(chr(ord(char) + 0xFEE0) if "!" <= char <= "~" else char for char in text)


@pytest.mark.parametrize("invisible", INVISIBLE)
def test_an_invisible_character_inside_a_blocked_word_does_not_hide_it(invisible):
    text = f"notes on proj{invisible}ect kest{invisible}rel for today"
    scan = policy_for(PROJECT, []).scan(text)
    assert scan.action == "block" and scan.patterns() == ("codename",)


def test_fullwidth_letters_do_not_hide_a_pattern_or_a_builtin():
    assert policy_for(PROJECT, []).scan(f"about {fullwidth('project kestrel')}").action == "block"
    email = fullwidth("jane.doe@example.com")
    scan = policy_for([], [{"slug": "email", "action": "redact"}]).scan(f"write to {email} soon")
    assert scan.redacted() == "write to [REDACTED:email] soon"


def test_a_redaction_covers_the_original_characters_that_spelled_the_match():
    text = f"my pass\u200bword: {fullwidth('hunter2')}\u200b and the rest"
    scan = policy_for(PASSWORD, []).scan(text)
    (region,) = scan.regions
    assert text[region.start : region.end] == f"pass\u200bword: {fullwidth('hunter2')}"
    assert scan.redacted() == "my [REDACTED:password]\u200b and the rest"


def test_a_ligature_and_a_circled_digit_fold_to_their_letters():
    filters = [{"pattern": r"\bfinance-1\b", "action": "flag", "label": "team"}]
    text = "the \ufb01nance-\u2460 report"  # ﬁ and ①
    scan = policy_for(filters, []).scan(text)
    (region,) = scan.regions
    assert text[region.start : region.end] == "\ufb01nance-\u2460"


def test_builtins_confirm_on_the_folded_text():
    card = fullwidth("4111 1111 1111 1111")
    scan = policy_for([], [{"slug": "credit-card", "action": "redact"}]).scan(f"card {card}.")
    assert scan.redacted() == "card [REDACTED:credit-card]."
    lookalike = fullwidth("4111 1111 1111 1112")  # Luhn fails, folded or not
    assert policy_for([], [{"slug": "credit-card", "action": "redact"}]).scan(lookalike).action is None


def test_a_combining_accent_composes_and_its_span_maps_to_the_whole_stretch():
    filters = [{"pattern": "café", "action": "redact", "label": "place"}]
    text = "meet at the cafe\u0301 at noon"  # e + combining acute: NFKC makes it é
    scan = policy_for(filters, []).scan(text)
    assert scan.patterns() == ("place",)
    assert scan.redacted() == "[REDACTED:place]"  # the stretch it is in (here: all of it), never less


def test_a_match_in_a_long_folded_text_maps_to_its_own_characters():
    filler = fullwidth("word ") * 200  # 1,000 folded characters: several stretches
    text = filler + "pass\u200bword: ｈｕｎｔｅｒ2 " + filler
    scan = policy_for(PASSWORD, []).scan(text)
    (region,) = scan.regions
    assert text[region.start : region.end] == "pass\u200bword: ｈｕｎｔｅｒ2"


def test_plain_and_normalized_text_is_its_own_view():
    for text in ("plain ascii", "déjà vu, straße, 日本語"):
        assert text_view(text).text is text


def test_spans_map_the_same_whatever_the_stretch_size(monkeypatch):
    text = "x" + "".join(f"{fullwidth(word)}\u200b " for word in ["a", "password:", "hunter2", "b"] * 20)
    sparse = policy_for(PASSWORD, []).scan(text)
    monkeypatch.setattr(textview, "STRETCH", 8)
    dense = policy_for(PASSWORD, []).scan(text)
    assert dense.regions == sparse.regions and len(sparse.regions) == 20
    assert "ｈｕｎｔｅｒ" not in dense.redacted()


# --- windows: the scan runs each pattern only where the combined program matched -----------------------------

FILTERS = [
    {"pattern": r"sk-[A-Za-z0-9]{8,}", "action": "block", "label": "key"},
    {"pattern": r"\bEMP-\d{6}\b", "action": "redact", "label": "employee"},
    {"pattern": r"(?i)password\s*[:=]\s*\S+", "action": "redact", "label": "password"},
    {"pattern": r"ab|abcdef", "action": "flag", "label": "alternation"},
    {"pattern": r"b\w*z", "action": "flag", "label": "inner-start"},
    {"pattern": r"(a+)+b", "action": "flag", "label": "nested"},
    {"pattern": r"(?m)^total$", "action": "flag", "label": "line"},
]
BUILTINS = [{"slug": slug, "action": "redact"} for slug in ("email", "phone", "ssn", "credit-card", "ip-address")]
PIECES = [
    "abcdefz",
    "EMP-123456",
    "EMP-1234567",
    "password: x",
    "aaab",
    "total",
    "bob@example.com",
    "+1 650-253-0000",
    "123-45-6789",
    "4111 1111 1111 1111",
    "10.0.0.1",
    "sk-abcdefghij",
    "déjà",
    "\n",
    " ",
    "word",
    "12",
]


def whole_passes(policy, text, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(re2_scan, "MAX_WINDOW_SEARCHES", 0)
        return policy.scan(text)


@pytest.mark.parametrize("seed", range(40))
def test_windows_find_what_whole_passes_find(seed, monkeypatch):
    rng = random.Random(seed)
    text = "".join(rng.choice(PIECES) + rng.choice(["", " ", "\n", "x"]) for _ in range(rng.randrange(1, 30)))
    filters = [item for item in FILTERS if item["action"] != "block" or seed % 2]
    policy = policy_for(filters, BUILTINS)
    assert sorted(policy.scan(text).matches) == sorted(whole_passes(policy, text, monkeypatch).matches)


def test_a_match_reaching_past_the_longest_one_at_its_start_is_still_whole(monkeypatch):
    # "ab" starts the combined match at a; "b...z" starts inside it and ends far beyond.
    policy = policy_for([FILTERS[3], FILTERS[4]], [])
    text = "xx ab" + "c" * 300 + "z yy"
    scan = policy.scan(text)
    found = {(text[match.start : match.end][:3], match.label) for match in scan.matches}
    assert found == {("ab", "alternation"), ("bcc", "inner-start")}
    assert sorted(scan.matches) == sorted(whole_passes(policy, text, monkeypatch).matches)
