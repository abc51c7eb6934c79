"""Issue 17 (must show): the staff console in a real headless Chromium (the distribution's package, driven by
Playwright) against a live gateway: log in, add a BYOK key, an invalid filter shows its error and saves nothing,
open the request log and filter it, open a generation, open the dashboard. Screenshots of every step go to
tests/console/artifacts/ (ignored by git; CI keeps them as artifacts).

Skipped, with the reason, when Playwright or the browser is missing, unless BROWSER_TESTS_REQUIRED is set (CI):
then a missing browser fails."""

import os
import re
import shutil
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


def fits(page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= WIDTH, f"{page.url} is {width} px wide"


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
