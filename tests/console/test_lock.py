"""Issue 17 (reproducible installs): requirements-dev.lock (make install, make test, CI) and requirements.lock (the
image) pin every dependency of pyproject.toml within its range, with hashes, the runtime lock at the dev lock's
versions. A range changed in pyproject.toml without `make lock` fails here."""

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def pins(name: str) -> dict[str, tuple[str, int]]:
    """{package: (version, number of hashes)} of a lock file."""
    found: dict[str, tuple[str, int]] = {}
    current = None
    for line in (ROOT / name).read_text().splitlines():
        match = PIN.match(line)
        if match:
            current = canonicalize_name(match[1])
            found[current] = (match[2], 0)
        elif current and line.strip().startswith("--hash=sha256:"):
            version, hashes = found[current]
            found[current] = (version, hashes + 1)
        elif not line.startswith(" "):
            current = None
    return found


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def check(requirements: list[str], locked: dict[str, tuple[str, int]]) -> list[str]:
    problems = []
    for text in requirements:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        if name not in locked:
            problems.append(f"{requirement.name} is not in the lock: run `make lock`")
        elif not requirement.specifier.contains(locked[name][0], prereleases=True):
            pin = f"{requirement.name}=={locked[name][0]}"
            problems.append(f"{pin} is outside {requirement.specifier}: run `make lock`")
    return problems


def test_every_dependency_is_locked_within_its_range_with_hashes():
    dev, runtime = pins("requirements-dev.lock"), pins("requirements.lock")
    spec = project()
    runtime_requirements = spec["project"]["dependencies"]
    dev_requirements = spec["project"]["optional-dependencies"]["dev"]
    build_requirements = spec["build-system"]["requires"]

    assert check(runtime_requirements + dev_requirements + build_requirements, dev) == []
    assert check(runtime_requirements + build_requirements, runtime) == []
    assert [name for name, (_, hashes) in {**dev, **runtime}.items() if hashes == 0] == []
    # The image runs the versions the tests ran: every runtime pin is the dev lock's.
    assert {name: version for name, (version, _) in runtime.items() if dev[name][0] != version} == {}
    assert len(runtime) < len(dev)  # the dev tools stay out of the image
    assert {"pytest", "playwright", "mypy", "litellm", "anthropic", "langchain-openai"} <= dev.keys()
    assert not {"pytest", "playwright", "mypy"} & runtime.keys()


def test_the_installs_use_the_locks_with_hashes():
    makefile = (ROOT / "Makefile").read_text()
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install --quiet --require-hashes -r requirements-dev.lock" in makefile
    assert "--no-deps --no-build-isolation -e ." in makefile
    assert "pip install --require-hashes -r requirements.lock" in dockerfile
    assert "--no-deps --no-build-isolation -e ." in dockerfile
    assert re.search(r"^lock:", makefile, re.M)
