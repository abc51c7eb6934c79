"""The two facts byok needs from the model catalog, which lives above it (routing). byok must not import
routing, so routing hands its lookups over at startup (`routing.apps.RoutingConfig.ready`) and byok asks
through here; before that (or without routing installed) asking is a programming error."""

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CatalogLookups:
    provider_credential_kind: Callable[[str], str | None]  # provider slug -> its credential shape, None if unknown
    model_exists: Callable[[str], bool]  # model id -> whether the catalog lists it


_lookups: CatalogLookups | None = None


def catalog_lookups_register(lookups: CatalogLookups) -> None:
    global _lookups
    _lookups = lookups


def catalog_lookups() -> CatalogLookups:
    if _lookups is None:
        raise RuntimeError("the catalog has not registered its lookups with byok (is routing installed?)")
    return _lookups
