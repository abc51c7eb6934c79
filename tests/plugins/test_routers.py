"""auto-router, auto-beta-router and pareto-router through the stand-in: five stand-in models of known prices and
scores (tests/plugins/test_routers_catalog.py). The router's choice is the served model, its entry in
gateway_metadata.pipeline, gateway_metadata.strategy, and the generation record's `router`."""

import time

import pytest

from gateway.billing.models import Generation
from plugins.routers.classify import heuristic
from routing.health import health_record, stats_forget
from routing.models import Endpoint
from tests.plugins.test_routers_catalog import routers_catalog
from tests.support import assert_error_envelope, sse_events

METADATA = {"HTTP_X_GATEWAY_METADATA": "enabled"}
CODING = "Write a python function that parses a CSV line; fix the bug in my code"


@pytest.fixture
def catalog(db, standin):
    routers_catalog(standin)
    return standin


def post(persona, model: str, plugins: list | None = None, text: str = CODING, **fields):
    payload = {"model": model, "input": fields.pop("input", text), **fields}
    if plugins is not None:
        payload["plugins"] = plugins
    return persona.client().post("/api/v1/responses", payload, format="json", **METADATA)


def entry_of(body: dict, name: str) -> dict:
    return next(e for e in body["gateway_metadata"]["pipeline"] if e["name"] == name)


def test_auto_router_default_tradeoff_favours_cheap_and_records_the_decision(alice, catalog):
    response = post(alice, "gateway/auto")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["model"] == "acme/alpha"  # default cost_quality_tradeoff 9: the cheapest wins
    metadata = body["gateway_metadata"]
    assert metadata["strategy"] == "auto" and metadata["requested"] == "gateway/auto"
    entry = entry_of(body, "auto-router")
    assert entry["data"]["task_type"] == "coding" and entry["data"]["classifier"] == "heuristic"
    assert entry["data"]["chosen"] == "acme/alpha" and entry["data"]["cost_quality_tradeoff"] == 9
    record = Generation.objects.get(pk="gen-" + body["id"].removeprefix("resp_"))
    assert record.requested_model == "gateway/auto" and record.model == "acme/alpha"
    assert record.router["task_type"] == "coding" and record.router["strategy"] == "auto"


def test_auto_router_quality_first_picks_the_best_for_the_task(alice, catalog):
    plugins = [{"id": "auto-router", "cost_quality_tradeoff": 0}]
    assert post(alice, "gateway/auto", plugins).json()["model"] == "bolt/delta"  # coding 0.95
    writing = post(alice, "gateway/auto", plugins, text="Write a poem and an essay about the sea")
    assert writing.json()["model"] == "corp/epsilon"  # writing 0.95
    assert entry_of(writing.json(), "auto-router")["data"]["task_type"] == "writing"


@pytest.mark.parametrize(
    ("tier", "model"),
    [
        ("low", "acme/alpha"),
        ("medium", "acme/beta"),
        ("high", "bolt/gamma"),
        ("xhigh", "bolt/delta"),
        ("max", "corp/epsilon"),
    ],
)
def test_cost_tiers_pick_the_price_percentile_band(alice, catalog, tier, model):
    # Percentiles of the five by price: 0, 20, 40, 60, 80: one model per band; cost_tier beats the tradeoff.
    body = post(alice, "gateway/auto", [{"id": "auto-router", "cost_tier": tier, "cost_quality_tradeoff": 0}]).json()
    assert body["model"] == model
    assert entry_of(body, "auto-router")["data"]["cost_tier"] == tier


def test_wildcards_then_exclusion_which_wins(alice, catalog):
    quality = {"id": "auto-router", "cost_quality_tradeoff": 0}
    body = post(alice, "gateway/auto", [{**quality, "allowed_models": ["bolt/*"]}]).json()
    assert body["model"] == "bolt/delta" and set(entry_of(body, "auto-router")["data"]["candidates"]) == {
        "bolt/gamma",
        "bolt/delta",
    }
    body = post(alice, "gateway/auto", [{**quality, "allowed_models": ["bolt/*"], "excluded_models": ["*/delta"]}])
    assert body.json()["model"] == "bolt/gamma"
    refused = post(alice, "gateway/auto", [{**quality, "allowed_models": ["bolt/*"], "excluded_models": ["bolt/*"]}])
    error = assert_error_envelope(refused, 404)
    assert error["error"]["message"] == "No models match your request and model restrictions"


def test_settings_under_the_other_router_id_are_ignored(alice, catalog):
    body = post(alice, "gateway/auto-beta", [{"id": "auto-router", "cost_tier": "max"}]).json()
    assert body["model"] == "acme/alpha"  # the auto-router's cost_tier does not configure auto-beta
    entry = entry_of(body, "auto-beta-router")
    assert entry["data"]["ignored_settings"] == ["auto-router"]
    assert post(alice, "gateway/auto-beta", [{"id": "auto-beta-router", "cost_tier": "max"}]).json()["model"] == (
        "corp/epsilon"
    )


def test_router_plugin_without_its_slug_is_refused(alice, catalog):
    refused = post(alice, "acme/alpha", [{"id": "pareto-router"}])
    assert "gateway/pareto-code" in assert_error_envelope(refused, 400)["error"]["message"]


def test_pin_model_reuses_the_sessions_model(alice, catalog):
    first = post(alice, "gateway/auto", [{"id": "auto-router", "cost_tier": "max"}], session_id="s-1")
    assert first.json()["model"] == "corp/epsilon"
    conversation = [
        {"role": "user", "content": CODING},
        {"role": "assistant", "content": "Here is the function."},
        {"role": "user", "content": "Now add a unit test for the code"},
    ]
    pinned = post(
        alice,
        "gateway/auto",
        [{"id": "auto-router", "cost_tier": "low", "pin_model": True}],
        input=conversation,
        session_id="s-1",
    ).json()
    assert pinned["model"] == "corp/epsilon"
    assert entry_of(pinned, "auto-router")["data"]["reason"].startswith("pin_model")
    unpinned = post(
        alice, "gateway/auto", [{"id": "auto-router", "cost_tier": "low"}], input=conversation, session_id="s-1"
    )
    assert unpinned.json()["model"] == "acme/alpha"
    other_session = post(
        alice,
        "gateway/auto",
        [{"id": "auto-router", "cost_tier": "low", "pin_model": True}],
        input=conversation,
        session_id="s-2",
    )
    assert other_session.json()["model"] == "acme/alpha"


def test_classifier_model_is_called_and_billed(alice, db, standin, settings):
    routers_catalog(standin, scripts={"acme/beta": "text=math"})
    settings.AUTO_ROUTER_CLASSIFIER_MODEL = "acme/beta"
    body = post(alice, "gateway/auto", [{"id": "auto-router", "cost_quality_tradeoff": 0}]).json()
    entry = entry_of(body, "auto-router")
    assert entry["data"]["task_type"] == "math" and entry["data"]["classifier"] == "model:acme/beta"
    assert entry["cost_usd"] > 0
    record = Generation.objects.get(pk="gen-" + body["id"].removeprefix("resp_"))
    served = record.cost - __import__("decimal").Decimal(str(entry["cost_usd"]))
    assert served > 0 and body["usage"]["cost"] == pytest.approx(float(record.cost))
    assert body["model"] == "bolt/delta"  # math 0.9


def test_classifier_model_down_falls_back_to_the_heuristic(alice, db, standin, settings):
    routers_catalog(standin, scripts={"acme/beta": "status=500"})
    settings.AUTO_ROUTER_CLASSIFIER_MODEL = "acme/beta"
    entry = entry_of(post(alice, "gateway/auto").json(), "auto-router")
    assert entry["data"]["classifier"] == "heuristic" and "unavailable" in entry["data"]["classifier_note"]


# ---- the heuristic classifier on a labelled set ----------------------------------------------------------------

LABELLED = [
    ("Write a Python function to reverse a linked list", "coding"),
    ("Fix this bug: TypeError in my javascript code", "coding"),
    ("Refactor this SQL query to use a join", "coding"),
    ("Implement a REST API client class in TypeScript", "coding"),
    ("Solve the equation 3x + 5 = 20", "math"),
    ("Calculate the integral of x^2 from 0 to 3", "math"),
    ("What is the probability of two sixes with two dice?", "math"),
    ("Translate this paragraph into French", "translation"),
    ("How do you say good night in Japanese? Translate it", "translation"),
    ("Summarize this article in three key points", "summarization"),
    ("TL;DR of the meeting notes below", "summarization"),
    ("Extract all the email addresses and phone numbers from this text", "extraction"),
    ("Parse these invoices and pull out the fields total and date", "extraction"),
    ("Classify the sentiment of these reviews", "classification"),
    ("Categorize these support tickets by product area", "classification"),
    ("Write a short poem about autumn", "writing"),
    ("Draft an email to my landlord about the heating", "writing"),
    ("Write a blog article on remote work", "writing"),
    ("Let's roleplay: you are a pirate captain", "roleplay"),
    ("Pretend to be a medieval innkeeper and stay in character", "roleplay"),
    ("Load the CSV dataset and show the average and trend per month", "data_analysis"),
    ("Explain why the sky is blue", "reasoning"),
    ("Compare the trade-offs of microservices and monoliths", "reasoning"),
    ("What is the capital of Australia?", "question_answering"),
    ("Who was the first person on the moon?", "question_answering"),
    ("Hello! How are you today?", "chat"),
    ("Thanks, that helped", "chat"),
    ("Use the tools to browse the site and automate the workflow", "agentic"),
]


# TUNED: prompts written after the first keyword list (25% right then: 5 of 20); the keywords were widened with
# general vocabulary while looking at them. BLIND: written before that widening and measured once, after it (18 of
# 20); its two misses are kept as they are.
TUNED = [
    ("My Flask app returns a 500 when I post the form, here's the traceback", "coding"),
    ("How do I make this loop faster? for i in range(len(xs)): total += xs[i]", "coding"),
    ("Write a unit test for the parser module", "coding"),
    ("If a train leaves at 3pm going 60 mph, when does it arrive 150 miles away?", "math"),
    ("Find x if 2^x = 64", "math"),
    ("What's the German word for butterfly?", "translation"),
    ("Give me a one-paragraph overview of this report", "summarization"),
    ("Condense these notes into bullet points", "summarization"),
    ("From this resume, get the candidate's name, email and years of experience", "extraction"),
    ("Is this review positive or negative? 'The food was cold'", "classification"),
    ("Compose a birthday message for my grandmother", "writing"),
    ("Help me word a LinkedIn post announcing my new job", "writing"),
    ("You are Sherlock Holmes; talk to me as him", "roleplay"),
    ("Which of these two job offers should I take, given salary and commute?", "reasoning"),
    ("Why do cats purr?", "reasoning"),
    ("When was the Eiffel Tower built?", "question_answering"),
    ("Good evening, nice to meet you", "chat"),
    ("Here is my sales spreadsheet: which region grew fastest?", "data_analysis"),
    ("Book me a flight and then add it to my calendar", "agentic"),
    ("What does this chart image show?", "vision"),
]

BLIND = [
    ("Can you spot why this Go program deadlocks on the channel send?", "coding"),
    ("Convert this bash one-liner into a PowerShell equivalent", "coding"),
    ("Write a SQL migration adding an index on users.email", "coding"),
    ("What is 15% of 2,340?", "math"),
    ("Show that the square root of 2 is irrational", "math"),
    ("Render this sentence in Spanish: the meeting moved to Friday", "translation"),
    ("Put this menu into Italian", "translation"),
    ("Boil this 10-page contract down to what I actually need to know", "summarization"),
    ("List every date mentioned in the following email, as JSON", "extraction"),
    ("Tag each of these tweets as spam or not spam", "classification"),
    ("Write the opening chapter of a mystery novel set in Lisbon", "writing"),
    ("Polish the grammar of my cover letter", "writing"),
    ("Stay in character as a grumpy dwarf blacksmith for this scene", "roleplay"),
    ("Should we shard the database now or wait? Walk me through the pros and cons", "reasoning"),
    ("How many moons does Jupiter have?", "question_answering"),
    ("hey, what's up", "chat"),
    ("Given this table of monthly revenue, compute the year-over-year growth and spot outliers", "data_analysis"),
    ("Search the web for the latest release notes, then open a ticket summarizing them", "agentic"),
    ("Describe what is happening in the attached photo", "vision"),
    ("Is a tomato a fruit or a vegetable, and why?", "reasoning"),
]


def test_heuristic_accuracy_and_cost_on_labelled_sets(capsys):
    results = {}
    for name, labelled in (("keywords-in-view", LABELLED), ("tuned", TUNED), ("blind", BLIND)):
        right = sum(heuristic(text) == label for text, label in labelled)
        results[name] = (right, len(labelled))
    everything = LABELLED + TUNED + BLIND
    started = time.perf_counter()
    rounds = 50
    for _ in range(rounds):
        for text, _ in everything:
            heuristic(text)
    per_request_us = (time.perf_counter() - started) / (rounds * len(everything)) * 1e6
    with capsys.disabled():
        figures = ", ".join(f"{name} {right}/{count}" for name, (right, count) in results.items())
        print(f"\nheuristic classifier: {figures}; {per_request_us:.0f} us CPU per request")
    assert results["blind"][0] / results["blind"][1] >= 0.8
    assert results["keywords-in-view"][0] / results["keywords-in-view"][1] >= 0.9
    assert per_request_us < 5000


# ---- pareto-router -----------------------------------------------------------------------------------------------


def test_pareto_high_tier_cheapest_with_same_tier_fallbacks(alice, catalog):
    body = post(alice, "gateway/pareto-code").json()
    assert body["model"] == "bolt/gamma"  # high tier (>= 0.66): gamma 1.0, delta 2.0, epsilon 5.0
    metadata = body["gateway_metadata"]
    assert metadata["strategy"] == "pareto" and metadata["requested"] == "gateway/pareto-code"
    entry = entry_of(body, "pareto-router")
    assert entry["data"]["tier"] == "high" and entry["data"]["fallbacks"] == ["bolt/delta", "corp/epsilon"]


@pytest.mark.parametrize(("floor", "model", "tier"), [(0.5, "acme/beta", "medium"), (0.1, "acme/alpha", "low")])
def test_pareto_min_coding_score_picks_the_tier(alice, catalog, floor, model, tier):
    body = post(alice, "gateway/pareto-code", [{"id": "pareto-router", "min_coding_score": floor}]).json()
    assert body["model"] == model and entry_of(body, "pareto-router")["data"]["tier"] == tier


def test_pareto_max_price_bypasses_tiers_and_404s_when_nothing_fits(alice, catalog):
    body = post(alice, "gateway/pareto-code", [{"id": "pareto-router", "max_price": 0.6}]).json()
    assert body["model"] == "acme/beta"  # best coding score at or under 0.6 USD/M input (alpha 0.2, beta 0.5)
    refused = post(alice, "gateway/pareto-code", [{"id": "pareto-router", "max_price": 0.05}])
    assert "max_price" in assert_error_envelope(refused, 404)["error"]["message"]


def test_pareto_weighted_price_source(alice, db, standin):
    models = {
        "acme/cheapin": (0.5, 20.0, {}, 0.8),  # cheapest prompt, dear completion
        "acme/even": (1.0, 1.0, {}, 0.8),
    }
    routers_catalog(standin, models=models)
    assert post(alice, "gateway/pareto-code").json()["model"] == "acme/cheapin"
    weighted = post(alice, "gateway/pareto-code", [{"id": "pareto-router", "price_source": "weighted_avg"}]).json()
    assert weighted["model"] == "acme/even"  # default mix 3:1 -> 5.375 vs 1.0


def test_pareto_session_sticks_for_five_minutes(alice, catalog):
    assert post(alice, "gateway/pareto-code", session_id="s-9").json()["model"] == "bolt/gamma"
    Endpoint.objects.filter(model_id="bolt/gamma").update(price_prompt=3)
    Endpoint.objects.get(model_id="bolt/gamma").save()  # bump the catalog version
    stuck = post(alice, "gateway/pareto-code", session_id="s-9").json()
    assert stuck["model"] == "bolt/gamma" and entry_of(stuck, "pareto-router")["data"]["sticky"] is True
    assert post(alice, "gateway/pareto-code", session_id="s-10").json()["model"] == "bolt/delta"


def test_pareto_nitro_picks_the_fastest_p50(alice, catalog):
    latencies = {"bolt/gamma": 2.0, "bolt/delta": 1.0, "corp/epsilon": 0.2}
    for model, seconds in latencies.items():
        endpoint = Endpoint.objects.get(model_id=model)
        for _ in range(5):
            health_record(endpoint_id=endpoint.id, ok=True, latency_s=seconds)
    stats_forget()
    body = post(alice, "gateway/pareto-code:nitro").json()
    assert body["model"] == "corp/epsilon"
    assert entry_of(body, "pareto-router")["data"]["nitro"] is True


def test_usage_ranking_follows_this_deployments_spend_and_the_admin_shows_it(alice, catalog, settings):
    assert post(alice, "gateway/auto", [{"id": "auto-router", "cost_tier": "max"}]).json()["model"] == "corp/epsilon"
    quality = [{"id": "auto-router", "cost_quality_tradeoff": 0}]
    assert post(alice, "gateway/auto", quality).json()["model"] == "bolt/delta"  # benchmarks: coding 0.95
    settings.AUTO_ROUTER_RANKING = "usage"
    from django.core.cache import cache

    cache.clear()
    body = post(alice, "gateway/auto", quality).json()
    assert body["model"] == "corp/epsilon"  # the larger share of this deployment's coding spend (5/10 vs 2/4 USD/M)
    assert entry_of(body, "auto-router")["data"]["ranking"] == "usage"

    from django.contrib.admin.sites import site

    from routing.models import Model

    admin = site._registry[Model]
    assert admin.usage_share(Model.objects.get(pk="corp/epsilon")).startswith("coding: ")


def test_router_slugs_on_the_other_front_doors_and_streams(alice, catalog):
    client = alice.client()
    chat = client.post(
        "/api/v1/chat/completions",
        {"model": "gateway/pareto-code", "messages": [{"role": "user", "content": CODING}]},
        format="json",
    )
    assert chat.status_code == 200, chat.content
    assert chat.json()["model"] == "bolt/gamma"
    messages = client.post(
        "/api/v1/messages",
        {"model": "gateway/auto", "max_tokens": 64, "messages": [{"role": "user", "content": CODING}]},
        format="json",
    )
    assert messages.status_code == 200, messages.content
    assert messages.json()["model"] == "acme/alpha"
    streamed = post(alice, "gateway/auto", [{"id": "auto-router", "cost_tier": "max"}], stream=True)
    events, _ = sse_events(streamed)
    completed = next(e for e in events if e["type"] == "response.completed")["response"]
    assert completed["model"] == "corp/epsilon"
    embeddings = client.post("/api/v1/embeddings", {"model": "gateway/auto", "input": "hi"}, format="json")
    assert embeddings.status_code in (400, 404)


def test_callers_fallback_models_follow_the_routers_and_a_router_is_never_a_fallback(alice, catalog):
    body = post(alice, "gateway/pareto-code", [{"id": "pareto-router", "max_price": 0.6}], models=["corp/epsilon"])
    assert body.json()["model"] == "acme/beta"
    available = {e["model"] for e in body.json()["gateway_metadata"]["endpoints"]["available"]}
    assert "corp/epsilon" in available
    refused = post(alice, "acme/alpha", models=["gateway/auto"])
    assert "fallback" in assert_error_envelope(refused, 400)["error"]["message"]


def test_a_router_turned_off_by_its_entry_is_a_400(alice, catalog):
    refused = post(alice, "gateway/auto", [{"id": "auto-router", "enabled": False}])
    assert "turns off" in assert_error_envelope(refused, 400)["error"]["message"]


def test_guardrail_limits_narrow_the_candidates(alice, catalog):

    client = alice.client(management=True)
    created = client.post(
        "/api/v1/guardrails", {"name": "only bolt", "allowed_models": ["bolt/gamma", "bolt/delta"]}, format="json"
    )
    assert created.status_code in (200, 201), created.content
    guardrail_id = created.json()["data"]["id"]
    assigned = client.post(
        f"/api/v1/guardrails/{guardrail_id}/assignments/keys",
        {"key_hashes": [alice.provisioned.inference_key.key.hash]},
        format="json",
    )
    assert assigned.status_code in (200, 201), assigned.content
    body = post(alice, "gateway/auto").json()
    assert body["model"] == "bolt/gamma"  # the cheapest the guardrail allows
    listed = {m["id"] for m in alice.client().get("/api/v1/models").json()["data"]}
    assert "gateway/auto" in listed and "acme/alpha" not in listed
    assert set(entry_of(body, "auto-router")["data"]["candidates"]) == {"bolt/gamma", "bolt/delta"}
