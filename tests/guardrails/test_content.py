"""The content engine: pattern validation, ReDoS-shaped patterns, overlaps (block > redact > flag), exact redaction,
labels, offsets on non-ASCII text, policy caching and combining, the entity-model side."""

import dataclasses

import pytest

from guardrails.detectors import builtin_problem
from guardrails.detectors.entity import EntitySpan, entity_instructions, entity_spans
from guardrails.detectors.phone import MAX_PHONE_CHECKS
from guardrails.matches import Match, Rule
from guardrails.patterns import MAX_PATTERN_CHARS, pattern_problem
from guardrails.policy import MAX_CANDIDATES_PER_FILTER, ContentPolicy, policy_combine, policy_for


def rule(pattern: str, action: str, label: str | None = None) -> dict:
    return {"pattern": pattern, "action": action, **({"label": label} if label else {})}


EMPTY = "the pattern can match empty text (an optional part or anchors alone), so it would match anywhere"

# --- pattern_problem -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", [r"sk-[A-Za-z0-9]{32,}", r"(?i)\bproject\s+kestrel\b", r"\p{Greek}+", "x" * 4096])
def test_usable_patterns_have_no_problem(pattern):
    assert pattern_problem(pattern) is None


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(?<=a)b", "not a valid RE2 regular expression: invalid perl operator: (?<="),
        (r"a(?=b)", "not a valid RE2 regular expression: invalid perl operator: (?="),
        (r"(\w+)\s\1", r"not a valid RE2 regular expression: invalid escape sequence: \1"),
        (r"(unclosed", "not a valid RE2 regular expression: missing ): (unclosed"),
        (r"a{1001}", "not a valid RE2 regular expression: invalid repetition size: {1001}"),
        (r"(a{100}){100}", "not a valid RE2 regular expression: invalid repetition size: {100}"),
        (r"\pL{1000}", "not a valid RE2 regular expression: pattern too large - compile failed"),
        (
            "x" * (MAX_PATTERN_CHARS + 1),
            f"the pattern is 4097 characters long; at most {MAX_PATTERN_CHARS} are allowed",
        ),
        ("a*", EMPTY),
        (r"\b", EMPTY),
        (r"foo|", EMPTY),
        (r"(?m)^$", EMPTY),
        (r"\bx?", EMPTY),
        ("", "the pattern must be a non-empty string"),
    ],
)
def test_refused_patterns_say_why(pattern, reason):
    assert pattern_problem(pattern) == reason


# --- ReDoS shapes: RE2 accepts them and runs them in linear time -------------------------------------------------

# Each would take longer than the age of the universe on a backtracking engine (Python's re, JavaScript) with
# its attack input at this size; on RE2 the scan finishes within the normal test run.
REDOS_SHAPES = [
    (r"(a+)+$", "a" * 100_000 + "!"),
    (r"(a|aa)*c", "a" * 100_000),
    (r"(a|a)*b", "a" * 100_000),
    (r"(\w+\s?)+$", "word " * 20_000 + "!"),
    (r"(.*a){20}", "a" * 100_000),
    (r"^(([a-z])+.)+[A-Z]([a-z])+$", "aaaaaaaaaaaaaaaaaaaaaaaa" * 4000 + "!"),
]


@pytest.mark.parametrize(("pattern", "attack"), REDOS_SHAPES)
def test_redos_shaped_patterns_are_accepted_and_finish_on_their_attack_input(pattern, attack):
    assert pattern_problem(pattern) is None
    policy = policy_for([rule(pattern, "block", "shape")], [])
    scan = policy.scan(attack)
    # The scan finished (that is the point) and still answers correctly.
    expected = pattern in (r"(.*a){20}",)
    assert (scan.action == "block") is expected


def test_catastrophic_input_still_finds_the_match_that_is_there():
    policy = policy_for([rule(r"(a+)+b", "redact", "ab")], [])
    text = "a" * 50_000 + "b"
    assert policy.scan(text).redacted() == "[REDACTED:ab]"


# --- Overlaps: block beats redact beats flag -----------------------------------------------------------------------


def test_redact_inside_a_flag_span_redacts_the_whole_region_under_the_redact_label():
    policy = policy_for([rule(r"contact:\s*\S+", "flag", "contact"), rule(r"bob@\w+\.com", "redact", "mail")], [])
    scan = policy.scan("write contact: bob@example.com today")
    assert scan.action == "redact"
    assert [(r.start, r.end, r.action, r.labels) for r in scan.regions] == [(6, 30, "redact", ("contact", "mail"))]
    assert scan.redacted() == "write [REDACTED:mail] today"
    assert scan.patterns("flag") == ()
    assert scan.patterns("redact") == ("contact", "mail")


def test_block_overlapping_a_redaction_blocks_and_leaves_the_text_unredacted():
    policy = policy_for([rule(r"secret-\d+", "redact", "secret"), rule(r"\d+-top", "block", "top")], [])
    text = "the secret-42-top plan"
    scan = policy.scan(text)
    assert scan.action == "block"
    assert scan.patterns("block") == ("top",)
    assert scan.redacted() == text


def test_a_block_elsewhere_in_the_text_stops_the_search_for_redactions():
    policy = policy_for([rule("bob@example.com", "redact", "mail"), rule("drop table", "block", "sql")], [])
    scan = policy.scan("bob@example.com says drop table users")
    assert scan.action == "block"
    assert scan.matches == (Match(21, 31, "sql", "block"),)
    assert scan.patterns() == ("sql",)


def test_separate_regions_keep_their_own_actions():
    policy = policy_for([rule("alpha", "flag", "a"), rule("beta", "redact", "b"), rule("gamma", "flag", "g")], [])
    scan = policy.scan("alpha beta gamma")
    assert [(r.action, r.labels) for r in scan.regions] == [("flag", ("a",)), ("redact", ("b",)), ("flag", ("g",))]
    assert scan.action == "redact"
    assert scan.patterns("flag") == ("a", "g")
    assert scan.redacted() == "alpha [REDACTED:b] gamma"


def test_touching_spans_are_two_regions_and_two_replacements():
    policy = policy_for([rule("abc", "redact", "x"), rule("def", "redact", "y")], [])
    assert policy.scan("abcdef").redacted() == "[REDACTED:x][REDACTED:y]"


def test_overlapping_redactions_merge_under_the_first_then_longest_label():
    policy = policy_for(
        [rule("cdef", "redact", "late"), rule("bcd", "redact", "short"), rule("bcde", "redact", "long")], []
    )
    scan = policy.scan("abcdefg")
    assert scan.redacted() == "a[REDACTED:long]g"
    assert scan.patterns() == ("long", "short", "late")


def test_chained_overlaps_form_one_region_with_the_strongest_action():
    policy = policy_for([rule("abc", "flag", "f"), rule("cde", "redact", "r"), rule("efg", "flag", "f2")], [])
    scan = policy.scan("abcdefgh")
    assert [(r.start, r.end, r.action) for r in scan.regions] == [(0, 7, "redact")]
    assert scan.redacted() == "[REDACTED:r]h"


def test_every_match_of_a_pattern_is_replaced():
    policy = policy_for([rule(r"\bEMP-\d{6}\b", "redact", "employee")], [])
    assert policy.scan("EMP-123456 and EMP-654321.").redacted() == "[REDACTED:employee] and [REDACTED:employee]."


# --- Labels, offsets, edge cases ---------------------------------------------------------------------------------


def test_an_unlabelled_filter_reports_its_position_never_the_text():
    policy = policy_for([rule("one", "flag", "first"), rule("hunter2", "flag")], [])
    scan = policy.scan("my password is hunter2")
    assert scan.patterns() == ("filter-2",)
    assert "hunter2" not in repr(scan.patterns())


def test_offsets_are_characters_on_non_ascii_text():
    policy = policy_for([rule("bob", "redact", "name")], [{"slug": "email", "action": "redact"}])
    text = "日本語 café — bob mails zoë@example.com ✓"
    scan = policy.scan(text)
    assert [text[m.start : m.end] for m in sorted(scan.matches, key=lambda m: m.start)] == ["bob", "zoë@example.com"]
    assert scan.redacted() == "日本語 café — [REDACTED:name] mails [REDACTED:email] ✓"


def test_every_match_of_a_pattern_on_non_ascii_text_lands_on_its_characters():
    policy = policy_for([rule("x+", "redact", "x")], [])
    assert policy.scan("é x ü xx 日本 xxx ✓").redacted() == "é [REDACTED:x] ü [REDACTED:x] 日本 [REDACTED:x] ✓"


def test_a_filter_matching_past_the_bound_covers_the_rest_of_the_text():
    """One Python step per match would let a body packed with matches cost seconds: past the bound, the rest of
    the text from the next match on is one match (fail closed)."""
    policy = policy_for([rule("x", "redact", "x")], [])
    text = "x " * (MAX_CANDIDATES_PER_FILTER + 500)
    assert policy.scan(text).redacted() == "[REDACTED:x] " * MAX_CANDIDATES_PER_FILTER + "[REDACTED:x]"


def test_past_the_bound_of_libphonenumber_checks_phone_candidates_count_unchecked():
    policy = policy_for([], [{"slug": "phone", "action": "flag"}])
    invalid = " ".join(f"+1 123-456-78{n:02d}" for n in range(MAX_PHONE_CHECKS + 5))
    scan = policy.scan(invalid)
    assert len(scan.matches) == 5
    assert scan.matches[0].start == invalid.index(f"+1 123-456-78{MAX_PHONE_CHECKS:02d}")


def test_empty_text_and_empty_policy_find_nothing():
    assert policy_for([rule("x", "block")], []).scan("").action is None
    scan = policy_for([], []).scan("anything at all")
    assert (scan.action, scan.patterns(), scan.redacted()) == (None, (), "anything at all")


def test_patterns_are_case_sensitive_unless_they_say_otherwise():
    assert policy_for([rule("secret", "block")], []).scan("SECRET").action is None
    assert policy_for([rule("(?i)secret", "block")], []).scan("SECRET").action == "block"


def test_bad_definitions_are_refused_when_compiled():
    with pytest.raises(ValueError, match="content filter 'bad': invalid perl operator"):
        policy_for([rule("(?=x)", "block", "bad")], [])
    with pytest.raises(ValueError, match="unknown content filter builtin 'nope'"):
        policy_for([], [{"slug": "nope", "action": "block"}])
    with pytest.raises(ValueError, match="unknown action 'delete'"):
        policy_for([rule("x", "delete", "x")], [])


def test_when_the_set_cannot_say_which_pattern_matched_every_pattern_runs(monkeypatch):
    """RE2::Set reports nothing when its DFA runs out of memory; the scan must not read that as 'no match'."""
    policy = ContentPolicy((Rule("pattern", "needle", "block", "n"), Rule("pattern", "thread", "flag", "t")))

    class SilentSet:
        def Match(self, data):  # noqa: N802 -- RE2's name
            return None

    (group,) = policy.groups
    monkeypatch.setattr(policy, "groups", (dataclasses.replace(group, which=SilentSet()),))
    assert policy.scan("hay needle hay").patterns("block") == ("n",)


# --- Compiled once, combined as a union ----------------------------------------------------------------------------


def test_the_same_definition_is_compiled_once():
    filters = [rule("cached-pattern", "flag", "c")]
    builtins = [{"slug": "email", "action": "redact"}]
    assert policy_for(filters, builtins) is policy_for([dict(f) for f in filters], [dict(b) for b in builtins])
    assert policy_for(filters, builtins) is not policy_for(filters, [{"slug": "email", "action": "block"}])


def test_combined_guardrails_are_the_union_and_block_wins_on_the_same_span():
    key_guardrail = policy_for([], [{"slug": "email", "action": "redact"}])
    workspace_default = policy_for([rule(r"@example\.com", "block", "example-domain")], [])
    member_guardrail = policy_for([rule("hello", "flag", "greeting")], [{"slug": "email", "action": "redact"}])
    combined = policy_combine([key_guardrail, workspace_default, member_guardrail])
    assert [r.label for r in combined.rules] == ["email", "example-domain", "greeting"]
    scan = combined.scan("hello bob@example.com")
    assert scan.action == "block"
    assert scan.patterns("block") == ("example-domain",)
    assert combined.scan("hello bob@test.org").redacted() == "hello [REDACTED:email]"
    assert policy_combine([key_guardrail, workspace_default]) is policy_combine([key_guardrail, workspace_default])


def test_engines_name_what_runs():
    policy = policy_for(
        [rule("x", "flag")], [{"slug": "phone", "action": "flag"}, {"slug": "ip-address", "action": "flag"}]
    )
    assert policy.engines == ("re2", "phonenumbers", "ipaddress")


# --- person-name and address: the configured entity model ----------------------------------------------------------


@pytest.mark.parametrize("slug", ["person-name", "address"])
def test_entity_builtins_are_refused_without_a_model(settings, slug):
    settings.GUARDRAILS_ENTITY_MODEL = ""
    assert builtin_problem(slug) == (
        f"the {slug!r} builtin needs an entity-recognition model and this gateway has none configured "
        "(set GUARDRAILS_ENTITY_MODEL to a catalog model id)"
    )
    settings.GUARDRAILS_ENTITY_MODEL = "acme/pii-tagger"
    assert builtin_problem(slug) is None


def test_other_builtins_need_nothing_and_unknown_slugs_are_named(settings):
    settings.GUARDRAILS_ENTITY_MODEL = ""
    assert [builtin_problem(slug) for slug in ("email", "phone", "ssn", "credit-card", "ip-address")] == [None] * 5
    assert builtin_problem("passport").startswith("unknown builtin 'passport'; expected one of: email, phone")


def test_entity_spans_come_from_the_model_answer_and_scan_applies_their_actions(settings):
    settings.GUARDRAILS_ENTITY_MODEL = "acme/pii-tagger"
    policy = policy_for([], [{"slug": "person-name", "action": "redact"}, {"slug": "address", "action": "flag"}])
    assert policy.entity_slugs == ("person-name", "address")
    assert policy.engines == ("model:acme/pii-tagger",)
    text = "Alice Smith lives at 12 Rue de Rivoli, Paris. Ask Alice Smith."
    answer = '{"person-name": ["Alice Smith"], "address": ["12 Rue de Rivoli, Paris"], "phone": ["ignored"]}'
    spans = entity_spans(text, answer, policy.entity_slugs)
    assert spans == (
        EntitySpan(0, 11, "person-name"),
        EntitySpan(50, 61, "person-name"),
        EntitySpan(21, 44, "address"),
    )
    scan = policy.scan(text, spans)
    assert scan.redacted() == "[REDACTED:person-name] lives at 12 Rue de Rivoli, Paris. Ask [REDACTED:person-name]."
    assert scan.patterns("flag") == ("address",)
    assert policy.scan(text).action is None


def test_entity_spans_of_kinds_the_policy_does_not_hold_are_dropped():
    policy = policy_for([], [{"slug": "address", "action": "block"}])
    assert policy.scan("Alice", [EntitySpan(0, 5, "person-name")]).action is None


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ("Sure! Here are the names: Alice", "the entity model's answer is not JSON"),
        ('["Alice"]', "the entity model's answer is not a JSON object"),
        ('{"person-name": "Alice"}', "the entity model's 'person-name' is not a list"),
    ],
)
def test_an_entity_answer_that_is_not_the_asked_json_fails_closed(answer, error):
    with pytest.raises(ValueError, match=error):
        entity_spans("Alice", answer, ("person-name",))


def test_entity_instructions_ask_only_for_the_kinds_held():
    assert '"address"' in entity_instructions(("address",)).split("kind (")[1].split(")")[0]
    assert '"person-name"' not in entity_instructions(("address",)).split("kind (")[1].split(")")[0]
