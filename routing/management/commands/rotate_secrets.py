from typing import Any

from django.core.management.base import BaseCommand, CommandError

from byok.crypto import SecretsError, current_key_id
from byok.services import byok_reseal_all
from routing.services import provider_reseal_all


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored secret (BYOK keys and operator provider keys) under the first key of "
        "GATEWAY_ENCRYPTION_KEYS. Rotation: prepend a new key, run this, then remove the old key."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            keys, providers = byok_reseal_all(), provider_reseal_all()
        except SecretsError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"re-encrypted {keys} BYOK keys and {providers} provider credentials under key {current_key_id()!r}"
        )
