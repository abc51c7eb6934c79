"""A key's spend, for its records and limit. The ledger that knows it (gateway.billing) sits above accounts, so
billing hands its readers over at startup (`gateway.billing.apps.BillingConfig.ready`) and accounts asks through
here; before that, asking is a programming error."""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from gateway.accounts.models import ApiKey


@dataclass(frozen=True)
class KeyUsage:
    usage: Decimal
    usage_daily: Decimal
    usage_weekly: Decimal
    usage_monthly: Decimal
    byok_usage: Decimal
    byok_usage_daily: Decimal
    byok_usage_weekly: Decimal
    byok_usage_monthly: Decimal
    last_used_at: datetime | None  # the key's latest request (None: never used)


@dataclass(frozen=True, slots=True)
class KeyUsageReaders:
    usage: Callable[[int], KeyUsage]  # key id -> spend, lifetime and per UTC window
    usage_in_window: Callable[[ApiKey], Decimal]  # what counts against the key's limit in its reset window


_readers: KeyUsageReaders | None = None


def key_usage_readers_register(readers: KeyUsageReaders) -> None:
    global _readers
    _readers = readers


def key_usage_readers() -> KeyUsageReaders:
    if _readers is None:
        raise RuntimeError("billing has not registered its key usage readers (is gateway.billing installed?)")
    return _readers
