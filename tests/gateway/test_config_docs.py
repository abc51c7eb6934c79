"""The configuration docs stay true to the code: docs/configuration.md's table is what scripts/config_table.py makes of
the code now, .env.example names exactly the variables the code reads (less the few listed below, with why), and
every relative link in the README and docs/ resolves, anchors included."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APP_PACKAGES = ("gateway", "responses_api", "routing", "byok", "plugins", "guardrails")

# Read by the code, yet not for .env.example, and why.
NOT_IN_ENV_EXAMPLE = {
    "GATEWAY_ENV_FILE": "it names the env file itself, so it cannot be set there (.env.example's header describes it)",
    "DJANGO_SETTINGS_MODULE": "manage.py and the WSGI module choose the production settings; only the tests change it",
}


def _script():
    spec = importlib.util.spec_from_file_location("config_table", ROOT / "scripts" / "config_table.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


config_table = _script()


def _pattern(name: str) -> re.Pattern[str]:
    """A variable's name as a regex: GATEWAY_PROVIDER_<SLUG>_API_KEY matches GATEWAY_PROVIDER_TOGETHER_API_KEY."""
    return re.compile(re.escape(name).replace(re.escape("<SLUG>"), "[A-Z0-9_]+") + r"\Z")


def _env_example_names() -> set[str]:
    """Every NAME= in .env.example: its settings are commented out (`# NAME=value`), several may share a line."""
    return set(re.findall(r"\b([A-Z][A-Z0-9_]*[A-Z0-9])=", (ROOT / ".env.example").read_text()))


def test_configuration_page_is_the_scripts_output():
    """`make docs` after a variable is added, removed or given a new default; the hand-written notes are kept."""
    current = (ROOT / "docs" / "configuration.md").read_text()
    assert current == config_table.page(current, config_table.render(config_table.collect())), (
        "docs/configuration.md is stale: run `make docs`"
    )


def test_the_script_finds_every_read_a_plain_search_finds():
    """A cross-check of the ast walk: every literal name a regex finds in an env(...) call of the settings or an
    os.environ / os.getenv read of the app packages is in the table, with defaults worked out as the code has them."""
    variables = config_table.collect()
    literal = re.compile(
        r"""(?:\benv(?:\.\w+)?|os\.environ\.get|os\.environ\.setdefault|os\.getenv)\(\s*["']([A-Z_0-9]+)"""
    )
    found = set()
    for package in APP_PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            found.update(literal.findall(path.read_text()))
    assert len(found) > 60
    assert found <= set(variables), sorted(found - set(variables))
    assert variables["GUARDRAILS_SCAN_MAX_BYTES_PER_REQUEST"].default == "8388608"  # 8 * 1024 * 1024
    assert variables["GUNICORN_WARM_REDIS_CONNECTIONS"].default == "128"  # through _count() and a module constant
    assert variables["GUNICORN_MAX_REQUESTS_PER_CONNECTION"].default == "100"
    assert variables["PORT"].default == "8000"  # scripts/run.sh
    assert "GATEWAY_PROVIDER_<SLUG>_API_KEY" in variables  # routing.catalog.env_name(slug, "API_KEY")
    assert "OPENAI_API_KEY" in variables  # the default catalog's api_key_env


def test_the_script_refuses_a_variable_it_cannot_explain():
    variables = config_table.collect()
    variables["NEW_KNOB"] = config_table.Variable("NEW_KNOB", "1", ["gateway/settings/base.py"])
    with pytest.raises(SystemExit, match="no meaning for \\['NEW_KNOB'\\]"):
        config_table.render(variables)
    del variables["NEW_KNOB"], variables["PORT"]
    with pytest.raises(SystemExit, match="read nowhere: \\['PORT'\\]"):
        config_table.render(variables)


def test_env_example_names_only_variables_the_code_reads():
    patterns = [_pattern(name) for name in config_table.collect()]
    unread = sorted(name for name in _env_example_names() if not any(p.match(name) for p in patterns))
    assert not unread, f".env.example names variables nothing reads: {unread}"


def test_env_example_documents_every_variable_the_code_reads():
    names = _env_example_names()
    missing = sorted(
        variable
        for variable in config_table.collect()
        if variable not in NOT_IN_ENV_EXAMPLE and not any(_pattern(variable).match(name) for name in names)
    )
    assert not missing, f".env.example omits {missing}"
    assert not set(NOT_IN_ENV_EXAMPLE) & names


# Relative links: [text](path), [text](path#anchor), [text](#anchor); code spans and blocks are not links.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens, repeats numbered."""
    anchors: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", FENCE.sub("", markdown), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in anchors:
            n += 1
            anchor = f"{slug}-{n}"
        anchors.add(anchor)
    return anchors


def broken_links(page: Path) -> list[str]:
    text = CODE_SPAN.sub("", FENCE.sub("", page.read_text()))
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        destination = (page.parent / path).resolve() if path else page
        if not destination.exists():
            broken.append(f"{page.name}: {target} (no such file)")
        elif anchor and destination.suffix == ".md" and anchor not in _anchors(destination.read_text()):
            broken.append(f"{page.name}: {target} (no such heading)")
    return broken


def _pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "benchmarks" / "RESULTS.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_relative_links_in_the_readme_and_docs_resolve():
    pages = _pages()
    assert sum(len(LINK.findall(page.read_text())) for page in pages) > 40
    assert [link for page in pages for link in broken_links(page)] == []


def test_the_link_check_sees_a_missing_file_and_a_missing_heading(tmp_path):
    (tmp_path / "other.md").write_text("# Other page\n\n## Part two\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n[ok](other.md#part-two) [ok](#page) [web](https://example.com/x) `[code](nowhere.md)`\n"
        "[gone](missing.md) [bad anchor](other.md#part-three) [bad here](#nope)\n"
    )
    assert broken_links(page) == [
        "page.md: missing.md (no such file)",
        "page.md: other.md#part-three (no such heading)",
        "page.md: #nope (no such heading)",
    ]
