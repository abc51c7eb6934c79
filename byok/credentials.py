"""Credentials as they cross app boundaries: frozen, and their repr never shows the secret."""

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from byok.crypto import mask_secret


@dataclass(frozen=True)
class ProviderCredentials:
    """What an adapter needs to call a provider. `api_key` is plaintext, in memory only for this request."""

    api_key: str = field(repr=False)
    is_byok: bool = False
    byok_key_id: UUID | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)  # structured credentials (cloud platforms)

    def __repr__(self) -> str:
        return (
            f"ProviderCredentials(api_key={mask_secret(self.api_key) if self.api_key else ''!r}, "
            f"is_byok={self.is_byok}, byok_key_id={self.byok_key_id})"
        )

    __str__ = __repr__
