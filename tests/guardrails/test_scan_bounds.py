"""Guardrail scans are bounded (issue 28 item 3): a request's text is scanned up to a byte budget per guardrail
and per request (over it: 413 naming the limit, nothing sent; never a truncated scan), costly combinations of
patterns are scanned in groups (results as when each pattern runs alone), and under gevent a scan gives other
greenlets their turn between chunks of its work."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.accounts.models import Member
from gateway.accounts.services import api_key_create
from guardrails import scan as re2_scan
from guardrails.matches import Rule
from guardrails.pacing import SCAN_YIELD_BYTES
from guardrails.policy import ContentPolicy, policy_combine, policy_for
from guardrails.scan import (
    MSG_SCAN_TOO_LARGE_GUARDRAIL,
    MSG_SCAN_TOO_LARGE_REQUEST,
    ScanTooLarge,
    scan_budget_check,
)
from guardrails.textview import STRETCH, text_views
from tests.guardrails.test_enforcement import METADATA, entity_model, guardrail, upstream_calls  # noqa: F401
from tests.support import assert_error_envelope

ROOT = Path(__file__).resolve().parents[2]
REDACT = {"content_filters": [{"pattern": r"ACME-\d{4}", "action": "redact", "label": "project-code"}]}


def text_of(size: int) -> str:
    """About `size` bytes of prose with a project code in it (and a two-byte character: bytes are counted)."""
    return ("caf\u00e9 ACME-1234 " + "lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]


def ask_with(client, text: str):
    payload = {"model": "standin/echo", "input": text, "provider": {"sort": "price"}}
    return client.post("/api/v1/responses", payload, format="json", **METADATA)


def test_a_guardrail_scans_at_most_its_byte_budget(alice, standin_catalog, settings):
    # Given a guardrail with a redact filter, and a per-guardrail budget of 4,000 bytes
    settings.GUARDRAILS_SCAN_MAX_BYTES_PER_GUARDRAIL = 4000
    guardrail(alice, **REDACT)
    # When the request's text is over it: 413 naming the limit, and nothing reaches the provider
    over = ask_with(alice.client(), text_of(4500))
    body = assert_error_envelope(over, 413)
    assert body["error"]["message"] == MSG_SCAN_TOO_LARGE_GUARDRAIL.format(
        name="Team policy", size=len(text_of(4500).encode()), limit=4000
    )
    assert "GUARDRAILS_SCAN_MAX_BYTES_PER_GUARDRAIL" in body["error"]["message"]
    assert upstream_calls(standin_catalog) == []
    # When it is under it: scanned and redacted as before
    under = ask_with(alice.client(), text_of(3500))
    assert under.status_code == 200, under.content
    (sent,) = upstream_calls(standin_catalog)
    assert "ACME-1234" not in str(sent["body"]) and "[REDACTED:project-code]" in str(sent["body"])


def test_a_request_scans_at_most_its_byte_budget_across_guardrails(alice, standin_catalog, settings):
    # Given a key guarded twice (its own guardrail and its creator's), each guardrail may scan 4,000 bytes and a
    # request 6,000 in all
    settings.GUARDRAILS_SCAN_MAX_BYTES_PER_GUARDRAIL = 4000
    settings.GUARDRAILS_SCAN_MAX_BYTES_PER_REQUEST = 6000
    Member.objects.create(account_id=alice.account_id, user_id="user_a")
    issued = api_key_create(account_id=alice.account_id, name="guarded twice", creator_user_id="user_a")
    by_key = guardrail(alice, assign=False, **REDACT)
    management = alice.client(management=True)
    assigned = management.post(
        f"/api/v1/guardrails/{by_key['id']}/assignments/keys", {"key_hashes": [issued.key.hash]}, format="json"
    )
    assert assigned.status_code == 200, assigned.content
    by_member = management.post(
        "/api/v1/guardrails",
        {"name": "Member policy", "content_filters": [{"pattern": "lorem", "action": "flag"}]},
        format="json",
    ).json()["data"]
    management.post(
        f"/api/v1/guardrails/{by_member['id']}/assignments/members", {"member_user_ids": ["user_a"]}, format="json"
    )
    client = alice.client()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.plaintext}")
    # When 2,500 bytes are scanned by two guardrails and once more by their filters together (for redactions:
    # 7,500 bytes): 413 naming the request's limit
    over = ask_with(client, text_of(2500))
    body = assert_error_envelope(over, 413)
    assert body["error"]["message"] == MSG_SCAN_TOO_LARGE_REQUEST.format(
        size=len(text_of(2500).encode()), count=2, total=3 * len(text_of(2500).encode()), limit=6000
    )
    assert upstream_calls(standin_catalog) == []
    # When 1,900 bytes are (5,700 in all): both guardrails scan it as before
    under = ask_with(client, text_of(1900))
    assert under.status_code == 200, under.content
    (sent,) = upstream_calls(standin_catalog)
    assert "[REDACTED:project-code]" in str(sent["body"])
    pipeline = under.json()["gateway_metadata"]["pipeline"]
    assert [(entry["name"], entry["summary"]) for entry in pipeline if entry["type"] == "guardrail"] == [
        ("Team policy", "redacted"),
        ("Member policy", "flagged"),
    ]


def test_the_entity_models_pre_scan_counts_as_a_second_read(alice, standin_catalog, entity_model, settings):  # noqa: F811
    # Given a guardrail with a redact filter and the person-name builtin (the entity model is asked, after the
    # patterns read the text once to refuse a block first, and they read it again with its spans), 4,000 bytes each
    settings.GUARDRAILS_SCAN_MAX_BYTES_PER_GUARDRAIL = 4000
    guardrail(alice, **REDACT, content_filter_builtins=[{"slug": "person-name", "action": "redact"}])
    entity_model(json.dumps({"person-name": []}))
    # When 2,500 bytes are sent (read twice: 5,000): 413 naming the guardrail's limit, nothing asked or sent
    over = ask_with(alice.client(), text_of(2500))
    body = assert_error_envelope(over, 413)
    assert body["error"]["message"] == MSG_SCAN_TOO_LARGE_GUARDRAIL.format(
        name="Team policy", size=2 * len(text_of(2500).encode()), limit=4000
    )
    assert upstream_calls(standin_catalog) == []
    # When 1,900 are (3,800): the entity model is asked and the code redacted
    under = ask_with(alice.client(), text_of(1900))
    assert under.status_code == 200, under.content
    sent = [call for call in upstream_calls(standin_catalog) if "You find personal data" not in str(call["body"])]
    assert len(sent) == 1 and "[REDACTED:project-code]" in str(sent[0]["body"])


# Patterns each cheap alone whose union is not: counted repetitions make the combined automaton's states multiply
# (an RE2::Set never falls back from its DFA, so it rebuilds states on every byte: ~30 s of CPU per MiB here).
HOSTILE = [
    r"[a-q][^u-z]{13}x",
    r"(?s).{0,1000}secret",
    r"\w{20,1000}@",
    r"(?i)(a|b|c|d|e)*a(a|b|c|d|e){12}z",
    r"(x+x+)+y",
    r"[a-z ]{1,500}q{3}",
    r"(?:\w+\s+){1,50}password",
]


def hostile_text(size: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz     xyz0123"
    state = 12345
    out = []
    for _ in range(size):
        state = (state * 1103515245 + 12345) % (1 << 31)
        out.append(letters[state % len(letters)])
    return "".join(out) + " qqq the secret password x@"


def test_costly_pattern_unions_are_scanned_in_groups_with_the_same_results():
    # Given a guardrail whose patterns are cheap alone but whose union is a large program
    rules = tuple(Rule("pattern", pattern, "flag", f"p{number}") for number, pattern in enumerate(HOSTILE))
    policy = ContentPolicy(rules)
    # Then they are combined only in groups whose programs stay small, each pattern in exactly one
    groups = policy.groups
    assert len(groups) > 1
    assert sorted(label for group in groups for label in group.labels) == sorted(rule.label for rule in rules)
    assert all(group.program_size <= policy.group_limit or len(group.labels) == 1 for group in groups)
    # And a scan finds exactly what each pattern finds alone
    text = hostile_text(20_000)
    alone = {match for rule in rules for match in ContentPolicy((rule,)).scan(text).matches}
    assert set(policy.scan(text).matches) == alone
    assert alone  # the text has matches of several patterns to compare
    assert len({match.label for match in alone}) >= 4


def test_a_group_found_slow_is_split_into_its_patterns_with_the_same_results():
    # Given a combined group of two patterns (whether it is slow is timed on real texts: not asserted here)
    rules = (Rule("pattern", HOSTILE[6], "flag", "words"), Rule("pattern", r"(?s).{0,50}secret", "flag", "secret"))
    policy = ContentPolicy(rules)
    (group,) = policy.groups
    text = hostile_text(5000)
    before = set(policy.scan(text).matches)
    # When it is split, each pattern is a group of its own, and a scan finds the same
    policy._split(group)
    assert [g.labels for g in policy.groups] == [("words",), ("secret",)]
    assert set(policy.scan(text).matches) == before
    assert {match.label for match in before} == {"words", "secret"}


def test_the_usual_builtins_and_filters_stay_one_group():
    builtins = [{"slug": slug, "action": "redact"} for slug in ("email", "phone", "ssn", "credit-card", "ip-address")]
    policy = policy_for([{"pattern": r"ACME-\d{4}", "action": "block"}], builtins)
    assert len(policy.groups) == 1


GEVENT_SCAN = """
from gevent import monkey

monkey.patch_all()

import django
import gevent

django.setup()

from guardrails.policy import policy_for
from guardrails.textview import text_views

filters = [{"pattern": p, "action": "redact", "label": f"f{n}"} for n, p in enumerate(%(patterns)r)]
policy = policy_for(filters, [])
text = %(text)s
ticks = []

def ticker():
    while True:
        ticks.append(1)
        gevent.sleep(0)

other = gevent.spawn(ticker)
scan = policy.scan(text)  # no explicit yield before or after: the other greenlet runs only if the scan yields
during = len(ticks)
other.kill()
folded = sum(len(data) for _, data in text_views(text))
print(json.dumps({"ticks": during, "matches": len(scan.matches), "bytes": len(text.encode()), "folded": folded}))
"""


def gevent_scan(patterns: list[str], text: str) -> dict:
    """Scan `text` (a Python expression) in a monkey-patched gevent process, counting another greenlet's turns."""
    script = "import json\n" + GEVENT_SCAN % {"patterns": patterns, "text": text}
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "gateway.settings.test"}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_large_scan_lets_other_greenlets_run_under_gevent():
    # Given a gevent process (monkey-patched, as the gevent workers are) scanning ~3 MB of text with findings
    patterns = [r"ACME-\d{4}", r"INV-\d{4}", r"(?i)confidential"]
    text = '("lorem ipsum dolor sit amet " * 200 + "ACME-1234 ") * 500 + "x" * 300_000 + " INV-2026 "'
    result = gevent_scan(patterns, text)
    # Then the scan found everything, and another greenlet ran about once per SCAN_YIELD_BYTES read (64 KiB)
    assert result["matches"] == 501
    assert result["ticks"] >= result["bytes"] // SCAN_YIELD_BYTES // 2


def test_folding_a_text_that_nfkc_expands_lets_other_greenlets_run_under_gevent():
    # Given 1 MB of U+FDFA, which NFKC folds to 18 characters (3 bytes to 33: an 11 MB view), and a code in it
    patterns = [r"ACME-\d{4}", r"(?i)confidential"]
    result = gevent_scan(patterns, '"\\ufdfa" * 350_000 + " ACME-1234 " + "\\ufdfa" * 1000')
    # Then the scan found it, and another greenlet ran about once per SCAN_YIELD_BYTES of the view built and read
    assert result["matches"] == 1
    assert result["folded"] > 10 * result["bytes"]
    assert result["ticks"] >= result["folded"] // SCAN_YIELD_BYTES // 2


EXPANDING = "\ufdfa"  # ARABIC LIGATURE SALLALLAHOU ALAYHE WASALLAM: 3 UTF-8 bytes, 33 once folded (NFKC)


def test_a_guardrail_counts_the_folded_view_against_its_byte_budget(alice, standin_catalog, settings):
    # Given a per-guardrail budget of 40,000 bytes and 2,000 U+FDFA (6,000 bytes; 66,000 once folded)
    settings.GUARDRAILS_SCAN_MAX_BYTES_PER_GUARDRAIL = 40_000
    guardrail(alice, **REDACT)
    # When they are sent: 413 naming the limit, and nothing reaches the provider
    over = ask_with(alice.client(), EXPANDING * 2000 + " ACME-1234")
    body = assert_error_envelope(over, 413)
    assert "GUARDRAILS_SCAN_MAX_BYTES_PER_GUARDRAIL" in body["error"]["message"]
    assert body["error"]["metadata"]["bytes"] > 40_000
    assert upstream_calls(standin_catalog) == []
    # When 1,000 are (33,000 folded): scanned and redacted
    under = ask_with(alice.client(), EXPANDING * 1000 + " ACME-1234")
    assert under.status_code == 200, under.content
    (sent,) = upstream_calls(standin_catalog)
    assert "ACME-1234" not in str(sent["body"]) and "[REDACTED:project-code]" in str(sent["body"])


def test_the_budget_stops_folding_a_text_once_it_is_over(settings):
    # Given a 1 MiB budget and 300,000 U+FDFA: 900 kB, under it, but a 9.9 MB view. Refused after folding about the
    # budget's worth, not the whole text (a 20 MiB body would otherwise fold into ~230 MB before the 413)
    settings.GUARDRAILS_SCAN_MAX_BYTES_PER_GUARDRAIL = 1 << 20
    with pytest.raises(ScanTooLarge) as refused:
        scan_budget_check(texts=["a few words", EXPANDING * 300_000], guardrails=["g"])
    assert "GUARDRAILS_SCAN_MAX_BYTES_PER_GUARDRAIL" in refused.value.message
    assert (1 << 20) < refused.value.metadata["bytes"] <= (1 << 20) + 33 * STRETCH
    # And a text over it before folding is refused on its own size, unfolded
    with pytest.raises(ScanTooLarge) as refused:
        scan_budget_check(texts=[EXPANDING * 400_000], guardrails=["g"])
    assert refused.value.metadata["bytes"] == 1_200_000


def test_a_text_is_folded_once_for_the_budget_and_every_scan(monkeypatch):
    # Given a text that folds (fullwidth letters) and two guardrails' policies, the folding counted
    folds = []

    def counted(text, *args, **kwargs):
        folds.append(text)
        return text_views(text, *args, **kwargs)

    monkeypatch.setattr(re2_scan, "text_views", counted)
    text = "\uff21\uff23\uff2d\uff25-1234 " + EXPANDING * 50 + " confidential " + str(os.getpid())
    first = policy_for([{"pattern": r"ACME-\d{4}", "action": "redact"}], [])
    second = policy_for([{"pattern": "confidential", "action": "flag"}], [])
    # When the budget is checked and each policy, then both together, scan it
    scan_budget_check(texts=[text], guardrails=["a", "b"])
    scans = [policy.scan(text) for policy in (first, second, policy_combine([first, second]))]
    # Then each found its matches on the folded view, and the text was folded once
    assert [scan.patterns() for scan in scans] == [("filter-1",), ("filter-1",), ("filter-1",)]
    assert [scan.action for scan in scans] == ["redact", "flag", "redact"]
    assert folds == [text]


@pytest.mark.parametrize("size", [0, 1])
def test_empty_and_tiny_texts_are_scanned_as_before(size):
    policy = policy_for([{"pattern": "a", "action": "flag"}], [])
    assert [match.label for match in policy.scan("a" * size).matches] == ["filter-1"] * size
