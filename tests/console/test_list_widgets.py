"""Issue 17: the admin edits JSON lists (a model's modalities and parameters, an endpoint's parameters and service
tiers, an account's allowed / ignored providers) with checkboxes for the known values and a text box for others,
posted as a browser posts them; every entry is then checked by the catalog's and the API's own rules."""

import html

from routing.models import AccountRoutingSettings, Endpoint, Model, Provider


def model_form(model: Model, scores: dict | None = None, **lists) -> dict:
    """The change form as a browser submits it: ticked boxes repeat the field's name, the text box is `__other`."""
    form = {
        "id": model.pk,
        "name": model.name,
        "kind": model.kind,
        "context_length": str(model.context_length),
        "created": str(model.created),
        "endpoints-TOTAL_FORMS": "0",
        "endpoints-INITIAL_FORMS": "0",
    }
    for name in ("input_modalities", "output_modalities", "supported_parameters"):
        ticked, other = lists.get(name, (getattr(model, name), ""))
        form[name] = ticked
        form[f"{name}__other"] = other
    for task, score in (scores or {}).items():
        form[f"task_scores__{task}"] = score
    return form


def page_of(response) -> str:
    return html.unescape(response.content.decode())


def test_a_models_lists_render_as_checkboxes_and_save_as_lists(staff, providers):
    model = Model.objects.get(pk="openai/gpt-4o")
    Model.objects.filter(pk=model.pk).update(input_modalities=["text", "image"], supported_parameters=["tools"])
    url = f"/admin/routing/model/{model.pk.replace('/', '_2F')}/change/"
    page = page_of(staff.get(url))
    assert '<input type="checkbox" name="input_modalities" value="image" id="id_input_modalities_1" checked>' in page
    assert '<input type="checkbox" name="input_modalities" value="audio"' in page  # offered, not ticked
    assert 'value="audio" id="id_input_modalities_2" checked' not in page
    assert 'name="supported_parameters" value="temperature"' in page  # the known parameters are offered
    assert 'name="output_modalities__other"' in page

    model.refresh_from_db()
    response = staff.post(
        url,
        model_form(
            model,
            input_modalities=(["text", "file"], "audio, video\nx-custom"),
            output_modalities=([], ""),
            supported_parameters=(["tools", "seed"], ""),
        ),
    )
    assert response.status_code == 302, page_of(response)[:3000]
    model.refresh_from_db()
    assert model.input_modalities == ["text", "file", "audio", "video", "x-custom"]
    assert model.output_modalities == []  # no box ticked and no text: an empty list
    assert model.supported_parameters == ["tools", "seed"]
    # A value the suggestions do not hold comes back in the text box; the known ones ticked.
    page = page_of(staff.get(url))
    assert 'name="input_modalities__other" id="id_input_modalities_other" value="x-custom"' in page
    assert 'value="video" id="id_input_modalities_3" checked' in page


def test_an_endpoints_lists_offer_what_the_catalog_uses(staff, providers):
    Endpoint.objects.filter(model_id="openai/gpt-4o").update(service_tiers=["flex"], supported_parameters=["seed"])
    endpoint = Endpoint.objects.get(model_id="openai/gpt-4o")
    page = page_of(staff.get(f"/admin/routing/endpoint/{endpoint.pk}/change/"))
    assert 'name="service_tiers" value="flex" id="id_service_tiers_0" checked' in page
    assert 'name="supported_parameters" value="seed" id="id_supported_parameters_0" checked' in page


def test_routing_settings_providers_are_checked_by_the_apis_serializer(staff, alice, providers):
    url = "/admin/routing/accountroutingsettings/add/"
    page = page_of(staff.get(url))
    for slug in Provider.objects.values_list("slug", flat=True):
        assert f'name="allowed_providers" value="{slug}"' in page

    form = {
        "account": alice.account_id,
        "allowed_providers": ["openai"],
        "allowed_providers__other": "nope",
        "ignored_providers__other": "",
        "data_collection": "allow",
    }
    response = staff.post(url, form)
    assert response.status_code == 200 and "unknown provider slugs: ['nope']" in page_of(response)
    assert not AccountRoutingSettings.objects.exists()

    response = staff.post(url, {**form, "allowed_providers__other": "", "ignored_providers": ["azure"]})
    assert response.status_code == 302
    row = AccountRoutingSettings.objects.get(account_id=alice.account_id)
    assert (row.allowed_providers, row.ignored_providers) == (["openai"], ["azure"])


def test_task_scores_are_a_number_box_per_task_type(staff, providers):
    model = Model.objects.get(pk="openai/gpt-4o")
    Model.objects.filter(pk=model.pk).update(task_scores={"coding": 0.5})
    url = f"/admin/routing/model/{model.pk.replace('/', '_2F')}/change/"
    page = page_of(staff.get(url))
    assert 'name="task_scores__coding" id="id_task_scores_coding" value="0.5"' in page
    assert 'name="task_scores__math" id="id_task_scores_math" value=""' in page  # every task type has a box

    model.refresh_from_db()
    for scores, message in (
        ({"coding": "1.5"}, "each task score must be a number from 0 to 1"),
        ({"coding": "high"}, "each task score must be a number from 0 to 1"),
        ({"cooking": "0.3"}, "unknown task types ['cooking']"),
    ):
        response = staff.post(url, model_form(model, scores))
        assert response.status_code == 200 and message in page_of(response), scores
    assert Model.objects.get(pk=model.pk).task_scores == {"coding": 0.5}

    response = staff.post(url, model_form(model, {"coding": "0.9", "math": "", "writing": "0.25"}))
    assert response.status_code == 302
    assert Model.objects.get(pk=model.pk).task_scores == {"coding": 0.9, "writing": 0.25}
    assert staff.post(url, model_form(model, {})).status_code == 302  # every box emptied: no scores
    assert Model.objects.get(pk=model.pk).task_scores == {}


def guardrail_form(persona, **lists) -> dict:
    form = {
        "account": persona.account_id,
        "workspace": persona.provisioned.workspace_id,
        "name": "staff-made",
        "description": "",
        "limit_usd": "",
        "reset_interval": "",
        "data_collection": "allow",
        "content_filters": "[]",
        "content_filter_builtins": "[]",
        **{
            f"{prefix}-{name}": value
            for prefix in ("key_assignments", "member_assignments")
            for name, value in (
                ("TOTAL_FORMS", "0"),
                ("INITIAL_FORMS", "0"),
                ("MIN_NUM_FORMS", "0"),
                ("MAX_NUM_FORMS", "1000"),
            )
        },
    }
    for name in ("allowed_models", "ignored_models", "allowed_providers", "ignored_providers"):
        ticked, other = lists.get(name, ([], ""))
        form[name] = ticked
        form[f"{name}__other"] = other
    return form


def test_a_guardrails_lists_are_widgets_and_nothing_ticked_is_no_restriction(staff, alice, providers):
    from guardrails.models import Guardrail

    add = "/admin/guardrails/guardrail/add/"
    page = page_of(staff.get(add))
    assert 'name="allowed_providers" value="openai"' in page and 'name="allowed_models__other"' in page

    response = staff.post(add, guardrail_form(alice, allowed_models=([], "openai/nope")))
    assert response.status_code == 200 and "openai/nope" in page_of(response)  # the API's unknown-model check
    assert not Guardrail.objects.exists()

    response = staff.post(
        add, guardrail_form(alice, allowed_providers=(["openai"], ""), allowed_models=([], "openai/*, openai/gpt-4o"))
    )
    assert response.status_code == 302, page_of(response)[:2000]
    guardrail = Guardrail.objects.get()
    assert guardrail.allowed_providers == ["openai"] and guardrail.allowed_models == ["openai/*", "openai/gpt-4o"]
    assert guardrail.ignored_providers is None and guardrail.ignored_models is None  # null: no restriction

    response = staff.post(f"/admin/guardrails/guardrail/{guardrail.pk}/change/", guardrail_form(alice))
    assert response.status_code == 302, page_of(response)[:2000]
    guardrail.refresh_from_db()
    assert guardrail.allowed_providers is None and guardrail.allowed_models is None


def test_an_endpoints_hosted_tools_are_the_known_capabilities_checked_against_its_adapter(staff, providers):
    from routing.providers.hosted import CAPABILITIES

    endpoint = Endpoint.objects.get(model_id="openai/gpt-4o")
    url = f"/admin/routing/endpoint/{endpoint.pk}/change/"
    page = page_of(staff.get(url))
    for capability in CAPABILITIES:
        assert f'name="hosted_tools" value="{capability}"' in page
    form = {
        "model": endpoint.model_id,
        "provider": endpoint.provider_id,
        "upstream_model": endpoint.upstream_model,
        "price_prompt": "1",
        "price_completion": "2",
        "price_request": "0",
        "price_web_search": "0",
        "context_length": "1000",
        "quantization": "unknown",
        "enabled": "on",
        "supported_parameters__other": "",
        "service_tiers__other": "",
        "hosted_tools": ["web_search"],
        "hosted_tools__other": "",
    }
    response = staff.post(url, form)
    assert response.status_code == 302, page_of(response)[:3000]
    endpoint.refresh_from_db()
    assert endpoint.hosted_tools == ["web_search"]
    response = staff.post(url, {**form, "hosted_tools__other": "teleport"})
    assert response.status_code == 200 and "hosted_tools must be a list of" in page_of(response)
    endpoint.refresh_from_db()
    assert endpoint.hosted_tools == ["web_search"]
