"""Issue 17 (must show): the staff console in a real headless Chromium (the distribution's package, driven by
Playwright) against a live gateway: log in, add a BYOK key, an invalid filter shows its error and saves nothing,
open the request log and filter it, open a generation, open the dashboard. Screenshots of every step go to
tests/console/artifacts/ (ignored by git; CI keeps them as artifacts).

Skipped, with the reason, when Playwright or the browser is missing, unless BROWSER_TESTS_REQUIRED is set (CI):
then a missing browser fails."""

import os
import re
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
import requests

from byok.models import ByokKey
from gateway.billing.models import Generation
from tests.live import LiveGateway

ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH = 1400  # list pages must fit it without a sideways scroll

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # pragma: no cover - the dev extras install it
    sync_playwright = None


def _missing() -> str | None:
    if sync_playwright is None:
        return "playwright is not installed (pip install -e '.[dev]')"
    if CHROMIUM is None:
        return "no Chromium on this machine (apt-get install -y chromium, or CHROMIUM_PATH)"
    return None


if _missing() and os.environ.get("BROWSER_TESTS_REQUIRED"):
    raise RuntimeError(f"BROWSER_TESTS_REQUIRED is set but {_missing()}")
pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


@pytest.fixture
def staff_user(transactional_db):
    from django.contrib.auth.hashers import PBKDF2PasswordHasher
    from django.contrib.auth.models import User

    # The live gateway runs the production settings (PBKDF2), the test settings a faster hasher.
    password = PBKDF2PasswordHasher().encode("staff-pw", PBKDF2PasswordHasher().salt(), iterations=1000)
    User.objects.create(
        username="staff", email="staff@example.com", password=password, is_staff=True, is_superuser=True
    )
    return "staff", "staff-pw"


@pytest.fixture
def gateway(transactional_db):
    live = LiveGateway(workers=1, threads=8)
    yield live
    live.stop()


@pytest.fixture
def page(monkeypatch):
    ARTIFACTS.mkdir(exist_ok=True)
    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are still synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": WIDTH, "height": 900})
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        yield page
        browser.close()
        assert errors == [], errors  # no script error on any page


def shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def widths(page) -> dict[str, int]:
    """The page's width, and how far its tables (a result list, a tabular inline) overflow their own scrolling box:
    a table scrolled sideways inside the page does not fit either."""
    return page.evaluate(
        """() => {
            const boxes = [...document.querySelectorAll('#changelist .results, .inline-group .tabular')];
            return {page: document.documentElement.scrollWidth,
                    table_overflow: Math.max(0, ...boxes.map(box => box.scrollWidth - box.clientWidth))};
        }"""
    )


def fits(page) -> None:
    size = widths(page)
    assert size["page"] <= WIDTH and size["table_overflow"] == 0, f"{page.url}: {size}"


def test_staff_console_in_a_browser(gateway, staff_user, alice, providers, standin_catalog, page):
    for _ in range(3):
        response = requests.post(
            f"{gateway.api}/responses",
            json={"model": "standin/echo", "input": "Hello"},
            headers={"Authorization": f"Bearer {alice.api_key}"},
            timeout=20,
        )
        assert response.status_code == 200, response.text
    generation_id = response.headers["X-Generation-Id"]

    # Log in.
    page.goto(f"{gateway.url}/admin/login/")
    page.fill("#id_username", staff_user[0])
    page.fill("#id_password", staff_user[1])
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_be_visible()
    shot(page, "01-admin-index")

    # Add a BYOK key.
    page.goto(f"{gateway.url}/admin/byok/byokkey/add/")
    page.fill("#id_account", str(alice.account_id))
    page.fill("#id_workspace", str(alice.provisioned.workspace_id))
    page.fill("#id_provider", "openai")
    page.fill("#id_key", "sk-proj-browser-added-0123456789")
    page.fill("#id_name", "from the browser")
    shot(page, "02-byok-add-form")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("was added successfully")
    shot(page, "03-byok-added")
    assert ByokKey.objects.filter(account_id=alice.account_id, name="from the browser").count() == 1
    assert "sk-proj-browser-added-0123456789" not in page.content()

    # An invalid filter: the error is on the page and nothing is saved.
    page.goto(f"{gateway.url}/admin/byok/byokkey/add/")
    page.fill("#id_account", str(alice.account_id))
    page.fill("#id_workspace", str(alice.provisioned.workspace_id))
    page.fill("#id_provider", "openai")
    page.fill("#id_key", "sk-proj-second-key-0123456789")
    page.fill("#id_allowed_models", '["no/such-model"]')
    page.click("input[name=_save]")
    expect(page.locator(".errornote")).to_be_visible()
    expect(page.locator(".errorlist").first).to_contain_text("unknown model ids")
    shot(page, "04-byok-invalid-filter")
    assert ByokKey.objects.filter(account_id=alice.account_id).count() == 1

    # The request log, filtered, and one generation.
    page.goto(f"{gateway.url}/admin/billing/generation/")
    expect(page.locator("#result_list")).to_contain_text(generation_id)
    fits(page)
    shot(page, "05-request-log")
    page.locator("#changelist-filter a", has_text="completed").first.click()
    expect(page).to_have_url(re.compile(r"status=completed"))
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == Generation.objects.filter(status="completed").count() == 3
    page.fill("#searchbar", generation_id)
    page.press("#searchbar", "Enter")
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    shot(page, "06-request-log-filtered")
    page.locator("#result_list tbody tr a", has_text=generation_id).first.click()
    expect(page.locator("body")).to_contain_text("Attempts (provider_responses)")
    shot(page, "07-generation")

    # The dashboard.
    page.goto(f"{gateway.url}/admin/dashboard/")
    expect(page.locator("svg.gw-chart")).to_have_count(5)
    expect(page.locator(".gw-totals")).to_contain_text("3 requests")
    fits(page)
    shot(page, "08-dashboard")
    page.goto(f"{gateway.url}/admin/accounts/account/{alice.account_id}/change/")
    expect(page.locator("body")).to_contain_text(generation_id)
    shot(page, "09-account")


# The list pages staff use most, with the default catalog's long ids and URLs on them, at a 1,400 px window.
LIST_PAGES = {
    "models": "/admin/routing/model/",
    "providers": "/admin/routing/provider/",
    "endpoints": "/admin/routing/endpoint/",
    "routing-settings": "/admin/routing/accountroutingsettings/",
    "keys": "/admin/accounts/apikey/",
    "accounts": "/admin/accounts/account/",
    "byok-keys": "/admin/byok/byokkey/",
    "generations": "/admin/billing/generation/",
}


def log_in(page, gateway, staff_user) -> None:
    page.goto(f"{gateway.url}/admin/login/")
    page.fill("#id_username", staff_user[0])
    page.fill("#id_password", staff_user[1])
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_be_visible()


def test_list_pages_fit_1400_px_and_list_widgets_edit_a_model(
    gateway, staff_user, alice, providers, standin_catalog, page
):
    from django.core.management import call_command

    from routing.models import AccountRoutingSettings, Endpoint, Model, Provider

    call_command("load_catalog", "routing/catalog/default.yaml", stdout=open(os.devnull, "w"))  # noqa: SIM115
    AccountRoutingSettings.objects.create(account_id=alice.account_id, allowed_providers=["openai", "standin-chat"])
    response = requests.post(
        f"{gateway.api}/responses",
        json={"model": "standin/echo", "input": "Hello"},
        headers={"Authorization": f"Bearer {alice.api_key}"},
        timeout=20,
    )
    assert response.status_code == 200, response.text
    # A request log row with the widest values a real one has: long model and provider names, large figures.
    Generation.objects.create(
        id="gen-" + "W" * 32,
        account_id=alice.account_id,
        api_key=Generation.objects.get().api_key,
        requested_model="anthropic/claude-sonnet-4.5-very-long-model-name-20250929",
        model="anthropic/claude-sonnet-4.5-very-long-model-name-20250929",
        provider="google-vertex/us-east5",
        status="incomplete",
        tokens_input=1234567,
        tokens_output=123456,
        cost=Decimal("12.345678901234"),
        latency_ms=1234567,
        is_byok=True,
    )
    log_in(page, gateway, staff_user)

    # Every list page of the admin (its index links them all), the ones staff use most first.
    page.goto(f"{gateway.url}/admin/")
    linked = page.eval_on_selector_all("#content-main tr[class^=model-] th a", "links => links.map(a => a.pathname)")
    assert set(LIST_PAGES.values()) <= set(linked)
    others = {
        path.strip("/").removeprefix("admin/").replace("/", "-"): path
        for path in linked
        if path not in LIST_PAGES.values()
    }
    measured = {}
    for name, path in {**LIST_PAGES, **others}.items():
        page.goto(f"{gateway.url}{path}")
        expect(page.locator("#changelist")).to_be_visible()
        measured[name] = widths(page)
        shot(page, f"10-list-{name}")
        if name == "generations":
            expect(page.locator("#result_list tbody tr")).to_have_count(2)
    # And the change pages with the widest forms: a provider's endpoints inline, an endpoint, an account, a guardrail.
    change_pages = {
        "provider": f"/admin/routing/provider/{Provider.objects.get(slug='openai').pk}/change/",
        "endpoint": f"/admin/routing/endpoint/{Endpoint.objects.filter(provider__slug='openai').first().pk}/change/",
        "account": f"/admin/accounts/account/{alice.account_id}/change/",
        "guardrail": "/admin/guardrails/guardrail/add/",
    }
    for name, path in change_pages.items():
        page.goto(f"{gateway.url}{path}")
        expect(page.locator("#content-main form")).to_be_visible()
        measured[name] = widths(page)
        shot(page, f"10-change-{name}")
    too_wide = {name: size for name, size in measured.items() if size["page"] > WIDTH or size["table_overflow"] > 0}
    assert too_wide == {}, too_wide

    # A model's modalities and parameters through the list widgets: tick, type, untick; saved as JSON lists.
    model = Model.objects.get(pk="standin/echo")
    assert model.input_modalities == ["text", "image", "file"]
    assert "tools" in model.supported_parameters and "verbosity" not in model.supported_parameters
    page.goto(f"{gateway.url}/admin/routing/model/")
    page.locator("#result_list a", has_text="standin/echo").first.click()
    expect(page.locator("#id_input_modalities")).to_be_visible()
    assert page.locator("#id_input_modalities input[type=checkbox][value=text]").is_checked()
    assert not page.locator("#id_input_modalities input[type=checkbox][value=audio]").is_checked()
    page.uncheck("#id_input_modalities input[type=checkbox][value=file]")
    page.fill("#id_input_modalities_other", "audio, video")
    page.uncheck("#id_supported_parameters input[type=checkbox][value=tools]")
    page.fill("#id_supported_parameters_other", "verbosity")
    page.fill("#id_task_scores_coding", "0.75")
    shot(page, "11-model-list-widgets")
    fits(page)
    page.click("input[name=_save]")
    shot(page, "12-model-saved")
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    model.refresh_from_db()
    assert model.input_modalities == ["text", "image", "audio", "video"]
    assert model.output_modalities == ["text"]
    assert "tools" not in model.supported_parameters and "verbosity" in model.supported_parameters
    assert "temperature" in model.supported_parameters
    assert model.task_scores == {"coding": 0.75}

    page.goto(f"{gateway.url}/admin/routing/model/")
    page.locator("#result_list a", has_text="standin/echo").first.click()
    for value in ("text", "image", "audio", "video"):  # the saved values come back ticked, in their order
        assert page.locator(f"#id_input_modalities input[value={value}]").is_checked()
    page.uncheck("#id_input_modalities input[type=checkbox][value=video]")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    model.refresh_from_db()
    assert model.input_modalities == ["text", "image", "audio"]

    # Routing settings: providers as checkboxes; a slug the API would refuse is an error and nothing is saved.
    settings_row = AccountRoutingSettings.objects.get(account_id=alice.account_id)
    page.goto(f"{gateway.url}/admin/routing/accountroutingsettings/{settings_row.pk}/change/")
    assert page.locator("#id_allowed_providers input[value=openai]").is_checked()
    page.check("#id_ignored_providers input[value=anthropic]")
    page.fill("#id_allowed_providers_other", "no-such-provider")
    page.click("input[name=_save]")
    expect(page.locator(".errornote")).to_be_visible()
    expect(page.locator(".errorlist").first).to_contain_text("no-such-provider")
    shot(page, "13-routing-settings-refused")
    fits(page)
    settings_row.refresh_from_db()
    assert (settings_row.allowed_providers, settings_row.ignored_providers) == (["openai", "standin-chat"], [])
    page.fill("#id_allowed_providers_other", "")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    settings_row.refresh_from_db()
    assert settings_row.allowed_providers == ["openai", "standin-chat"]
    assert settings_row.ignored_providers == ["anthropic"]
