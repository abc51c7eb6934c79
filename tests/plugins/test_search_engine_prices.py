"""Web search engines' prices live in the catalog (`search_engines` in the catalog file, SearchEngine rows staff
edit in the admin): what the web plugin and gateway:web_search charge per search. An engine without a row is
priced by the operator's WEB_SEARCH_PRICES, else its list price."""

from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from gateway.billing.models import Generation
from plugins.web.search import engine_price
from routing.models import SearchEngine
from routing.services import CatalogError, catalog_load
from tests.plugins.test_web_plugin import ask, searxng  # noqa: F401 (the stand-in SearXNG fixture)

DEFAULT_CATALOG = Path(__file__).resolve().parents[2] / "routing" / "catalog" / "default.yaml"


def test_the_catalogs_price_wins_over_the_operators_setting(db, settings):
    settings.WEB_SEARCH_PRICES = {"exa": "0.5", "brave": "0.02"}
    result = catalog_load(data={"search_engines": [{"engine": "exa", "price_per_search": 0.009, "source": "list"}]})
    assert result.search_engines == 1
    assert engine_price("exa") == Decimal("0.009")  # the catalog's
    assert engine_price("brave") == Decimal("0.02")  # no row: the setting's
    assert engine_price("tavily") == Decimal("0.008")  # neither: the list price


def test_a_price_staff_change_is_charged_at_once(db):
    catalog_load(data={"search_engines": [{"engine": "exa", "price_per_search": "0.007"}]})
    assert engine_price("exa") == Decimal("0.007")
    row = SearchEngine.objects.get(engine="exa")
    row.price_per_search = Decimal("0.011")
    row.save()  # as the admin does: the catalog version moves, every process re-reads within its window
    assert engine_price("exa") == Decimal("0.011")


@pytest.mark.parametrize(
    "row",
    [
        {"engine": "exa", "price_per_search": -1},
        {"engine": "exa", "price_per_search": "free"},
        {"engine": "Exa Search", "price_per_search": 0.01},
        {"engine": "exa"},
    ],
)
def test_bad_rows_are_refused_naming_the_engine(db, row):
    with pytest.raises(CatalogError):
        catalog_load(data={"search_engines": [row]})
    assert not SearchEngine.objects.exists()


def test_the_default_catalog_prices_the_four_engines(db):
    out = StringIO()
    call_command("load_catalog", str(DEFAULT_CATALOG), stdout=out)
    assert "4 search engines" in out.getvalue()
    prices = dict(SearchEngine.objects.values_list("engine", "price_per_search"))
    assert prices == {
        "exa": Decimal("0.007"),
        "tavily": Decimal("0.008"),
        "brave": Decimal("0.005"),
        "searxng": Decimal("0"),
    }
    assert all(SearchEngine.objects.values_list("source", flat=True))


def test_a_web_search_is_charged_at_the_catalogs_price(alice, searxng):  # noqa: F811
    one_endpoint = {"only": ["standin-chat"]}
    cheap = ask(alice, "Same question", plugins=[{"id": "web"}], provider=one_endpoint)  # the setting: 0.004
    catalog_load(data={"search_engines": [{"engine": "searxng", "price_per_search": "0.3"}]})
    dear = ask(alice, "Same question", plugins=[{"id": "web"}], provider=one_endpoint)
    assert cheap.status_code == dear.status_code == 200
    difference = Generation.objects.get(pk=dear["X-Generation-Id"]).cost
    difference -= Generation.objects.get(pk=cheap["X-Generation-Id"]).cost
    assert difference == Decimal("0.3") - Decimal("0.004")
