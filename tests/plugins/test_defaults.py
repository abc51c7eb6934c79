"""Account plugin defaults: staff set them in the admin, management keys with GET|PUT /plugins/defaults (400
naming the field, other accounts isolated); a default applies to each request that does not name the plugin, a
request's entry replaces it and `enabled: false` turns it off; the request path reads them from a per-process
cache (no query) that a change invalidates at once here and within CACHE_VERSION_CHECK_SECONDS elsewhere."""

import uuid

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given
from hypothesis import settings as examples
from hypothesis import strategies as st

from gateway.accounts.authentication import Caller
from gateway.versions import counters
from gateway.versions.models import Version
from plugins.common.config import plugin_mentioned, plugin_settings
from plugins.models import PluginDefault
from plugins.selectors import VERSION
from plugins.services import plugin_defaults_replace
from responses_api import stages
from responses_api.validation.plugins import PLUGIN_SERIALIZERS
from routing.stages import RequestContext
from tests.plugins.test_moderation import FLAG_VIOLENCE, ask, moderations_engine
from tests.support import assert_error_envelope

URL = "/api/v1/plugins/defaults"


def put(persona, plugins):
    return persona.client(management=True).put(URL, {"plugins": plugins}, format="json")


def context(persona, plugins=()) -> RequestContext:
    caller = Caller(
        key_id=0,
        key_hash="0" * 64,
        kind="inference",
        account_id=persona.account_id,
        workspace_id=persona.provisioned.workspace_id,
        plan="payg",
        creator_user_id=None,
    )
    return RequestContext(caller=caller, plugins=tuple(plugins))


@pytest.fixture
def unhonoured(monkeypatch) -> str:
    """A plugin no configured stage honours: web-fetch, with the server-tool loop taken out of the pipeline (every
    plugin is honoured by the default one)."""
    monkeypatch.setattr(stages, "POST_STAGES", [s for s in stages.POST_STAGES if "web-fetch" not in s.plugin_ids])
    assert "web-fetch" in set(PLUGIN_SERIALIZERS) - stages.honoured_plugins()
    return "web-fetch"


@pytest.fixture
def moderations(settings, standin_catalog):
    moderations_engine(settings, standin_catalog)
    return standin_catalog


# ---- the request path ----------------------------------------------------------------------------------


def test_a_default_applies_to_requests_that_do_not_name_the_plugin(alice, moderations):
    assert put(alice, [{"id": "moderation"}]).status_code == 200
    body = assert_error_envelope(ask(alice, f"Anything {FLAG_VIOLENCE}", plugins=[]), 403)
    assert body["error"]["metadata"]["reasons"] == ["hate", "violence"]
    clean = ask(alice, "A perfectly pleasant question", plugins=[])
    assert clean.status_code == 200
    assert [entry["name"] for entry in clean.json()["gateway_metadata"]["pipeline"]] == ["moderation"]


def test_enabled_false_in_the_request_turns_a_default_off(alice, moderations):
    put(alice, [{"id": "moderation"}])
    response = ask(alice, f"Anything {FLAG_VIOLENCE}", plugins=[{"id": "moderation", "enabled": False}])
    assert response.status_code == 200, response.content
    assert moderations.requests_for("/moderations") == []


def test_a_default_that_is_off_leaves_the_plugin_off_unless_the_request_turns_it_on(alice, moderations):
    put(alice, [{"id": "moderation", "enabled": False}])
    assert ask(alice, f"Anything {FLAG_VIOLENCE}", plugins=[]).status_code == 200
    assert_error_envelope(ask(alice, f"Anything {FLAG_VIOLENCE}", plugins=[{"id": "moderation"}]), 403)


def test_a_request_entry_replaces_the_default_whole(alice):
    plugin_defaults_replace(
        account_id=alice.account_id,
        entries=[{"id": "file-parser", "enabled": True, "pdf": {"engine": "native"}}, {"id": "web", "enabled": False}],
    )
    defaulted = context(alice)
    assert plugin_settings(defaulted, "file-parser") == {
        "id": "file-parser",
        "enabled": True,
        "pdf": {"engine": "native"},
    }
    assert plugin_settings(defaulted, "web") is None and plugin_mentioned(defaulted, "web")
    assert plugin_settings(defaulted, "fusion") is None and not plugin_mentioned(defaulted, "fusion")
    own = context(alice, [{"id": "file-parser", "enabled": True}])
    assert plugin_settings(own, "file-parser") == {"id": "file-parser", "enabled": True}  # no pdf from the default
    off = context(alice, [{"id": "file-parser", "enabled": False}])
    assert plugin_settings(off, "file-parser") is None and plugin_mentioned(off, "file-parser")


def test_other_accounts_get_none_of_it(alice, bob_other_account, moderations):
    put(alice, [{"id": "moderation"}])
    assert plugin_settings(context(bob_other_account), "moderation") is None
    assert ask(bob_other_account, f"Anything {FLAG_VIOLENCE}", plugins=[]).status_code == 200
    listed = bob_other_account.client(management=True).get(URL)
    assert listed.json() == {"data": {"plugins": []}}


def test_the_request_path_runs_no_query_for_defaults(alice):
    plugin_defaults_replace(account_id=alice.account_id, entries=[{"id": "moderation", "enabled": True}])
    ctx = context(alice)
    plugin_settings(ctx, "moderation")  # loads (and reads the version counters) once
    with CaptureQueriesContext(connection) as queries:
        for _ in range(50):
            assert plugin_settings(ctx, "moderation") == {"id": "moderation", "enabled": True}
            assert plugin_settings(ctx, "file-parser") is None
    assert len(queries) == 0


def test_a_change_here_is_seen_at_once_and_elsewhere_within_the_window(alice, settings, monkeypatch):
    """Another process's change (its row and its version counter, as its commit writes them) is seen once this
    process re-reads the counters, at most CACHE_VERSION_CHECK_SECONDS (0.5 s by default) later; this process's
    own change at once."""
    clock = [1000.0]
    monkeypatch.setattr(counters.time, "monotonic", lambda: clock[0])
    settings.CACHE_VERSION_CHECK_SECONDS = 0.5
    plugin_defaults_replace(account_id=alice.account_id, entries=[{"id": "moderation", "enabled": True}])
    ctx = context(alice)
    assert plugin_settings(ctx, "moderation") is not None  # this process's change: at once

    PluginDefault.objects.filter(account_id=alice.account_id).update(enabled=False)  # another process's write
    Version.objects.update_or_create(name=VERSION, defaults={"value": uuid.uuid4().hex})  # ... and its commit
    clock[0] += 0.4
    assert plugin_settings(ctx, "moderation") is not None  # still the cached copy, within the window
    clock[0] += 0.2
    assert plugin_settings(ctx, "moderation") is None  # 0.6 s later: seen (the window is 0.5 s, below 1 s)


# ---- the management API --------------------------------------------------------------------------------


def test_put_replaces_and_get_reads_them(alice):
    assert alice.client(management=True).get(URL).json() == {"data": {"plugins": []}}
    response = put(alice, [{"id": "moderation"}, {"id": "context-compression", "enabled": False}])
    assert response.status_code == 200, response.content
    expected = [
        {"id": "context-compression", "enabled": False, "engine": "middle-out"},
        {"id": "moderation", "enabled": True},
    ]
    assert response.json() == {"data": {"plugins": expected}}
    assert alice.client(management=True).get(URL).json() == {"data": {"plugins": expected}}
    assert put(alice, []).json() == {"data": {"plugins": []}}
    assert PluginDefault.objects.filter(account_id=alice.account_id).count() == 0


@pytest.mark.parametrize(
    ("plugins", "field"),
    [
        ([{"enabled": True}], "plugins[0].id"),
        ([{"id": "moderation"}, {"id": "no-such-plugin"}], "plugins[1].id"),
        ([{"id": "moderation"}, {"id": "moderation", "enabled": False}], "plugins[1].id"),
        ([{"id": "context-compression", "enabled": False, "engine": "top-down"}], "plugins[0].engine"),
        ([{"id": "moderation", "enabled": "yes"}], "plugins[0].enabled"),
        ([{"id": "file-parser", "enabled": False, "pdf": {"engine": "magic"}}], "plugins[0].pdf.engine"),
        ([{"id": "moderation", "threshold": 0.5}], "plugins[0].threshold"),
        ([{"id": "file-parser", "pdf": {"engine": "pdf-text", "engnie": "x"}}], "plugins[0].pdf.engnie"),
        ([{"id": 7}], "plugins[0].id"),
        ([None], "plugins[0].id"),
        ({"id": "moderation"}, "plugins"),
        ([{"id": "moderation"}] * 17, "plugins"),
    ],
)
def test_bad_defaults_are_a_400_naming_the_field(alice, plugins, field):
    body = assert_error_envelope(put(alice, plugins), 400)
    assert field in body["error"]["metadata"]["fields"], body
    assert PluginDefault.objects.filter(account_id=alice.account_id).count() == 0


numbers = st.floats(allow_nan=False, allow_infinity=False)  # JSON has no NaN or infinity
scalars = st.none() | st.booleans() | st.integers() | numbers | st.text(max_size=20)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
entries = st.fixed_dictionaries(
    {"id": st.sampled_from(sorted(PLUGIN_SERIALIZERS)) | values},
    optional={"enabled": values, "engine": values, "pdf": values, "max_tool_calls": values, "x": values},
)


@examples(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=st.lists(entries | values, max_size=4) | values)
def test_any_body_is_a_2xx_or_a_4xx_never_a_500(alice, payload):
    response = alice.client(management=True).put(URL, {"plugins": payload}, format="json")
    assert response.status_code in (200, 400), response.content
    if response.status_code == 400:
        assert_error_envelope(response, 400)


def test_a_plugin_no_stage_honours_is_refused_unless_it_is_off(alice, unhonoured):
    plugin_id = unhonoured
    body = assert_error_envelope(put(alice, [{"id": plugin_id}]), 400)
    assert "not available on this gateway" in body["error"]["metadata"]["fields"]["plugins[0].id"]
    assert put(alice, [{"id": plugin_id, "enabled": False}]).status_code == 200


def test_only_management_keys_use_it(alice):
    assert_error_envelope(alice.client().get(URL), 403)
    assert_error_envelope(alice.client().put(URL, {"plugins": []}, format="json"), 403)
    assert_error_envelope(Client().get(URL), 401)


def test_the_schema_documents_it(alice):
    schema = Client().get("/api/v1/openapi.json").json()
    operations = schema["paths"]["/plugins/defaults"]
    assert operations["get"]["operationId"] == "getPluginDefaults"
    assert operations["put"]["operationId"] == "updatePluginDefaults"


# ---- the admin -----------------------------------------------------------------------------------------


ADD = "/admin/plugins/plugindefault/add/"


def test_staff_set_a_default_in_the_admin_and_it_applies(alice, staff):
    response = staff.post(
        ADD, {"account": alice.account_id, "plugin_id": "moderation", "enabled": "on", "options": "{}"}
    )
    assert response.status_code == 302, response.content
    assert plugin_settings(context(alice), "moderation") == {"id": "moderation", "enabled": True}
    row = PluginDefault.objects.get(account_id=alice.account_id)
    response = staff.post(
        f"/admin/plugins/plugindefault/{row.pk}/change/",
        {"account": alice.account_id, "plugin_id": "moderation", "options": "{}"},
    )
    assert response.status_code == 302, response.content
    assert plugin_settings(context(alice), "moderation") is None and plugin_mentioned(context(alice), "moderation")
    staff.post(f"/admin/plugins/plugindefault/{row.pk}/delete/", {"post": "yes"})
    assert not plugin_mentioned(context(alice), "moderation")


@pytest.mark.parametrize(
    ("fields", "error_field"),
    [
        ({"plugin_id": "no-such-plugin", "options": "{}"}, "plugin_id"),
        ({"plugin_id": "context-compression", "options": '{"engine": "top-down"}'}, "options"),
        ({"plugin_id": "moderation", "options": "[1, 2]"}, "options"),
    ],
)
def test_the_admin_refuses_what_the_api_refuses(alice, staff, fields, error_field):
    response = staff.post(ADD, {"account": alice.account_id, **fields})
    assert response.status_code == 200  # the form again, with its error
    assert error_field in response.context["adminform"].form.errors
    assert PluginDefault.objects.count() == 0


def test_the_admin_refuses_a_plugin_no_stage_honours(alice, staff, unhonoured):
    plugin_id = unhonoured
    response = staff.post(ADD, {"account": alice.account_id, "plugin_id": plugin_id, "enabled": "on", "options": "{}"})
    assert "not available on this gateway" in str(response.context["adminform"].form.errors["plugin_id"])
