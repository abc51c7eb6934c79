import math
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from gateway.billing.rollups import key_usage_roll_up
from gateway.billing.services import holds_expire, longest_request_seconds, stale_hold_seconds

MSG_TOO_YOUNG = (
    "--older-than-minutes {minutes} would release the holds of live requests: a request may run for {longest} "
    "minutes (the longest upstream deadline, UPSTREAM_STREAM_MAX_SECONDS / UPSTREAM_TOTAL_TIMEOUT)"
)


class Command(BaseCommand):
    help = (
        "Release credit holds older than --older-than-minutes (default: the longest request deadline plus the "
        "settlement retries' window and a margin, 55 minutes with the default settings) that were never settled, "
        "e.g. after a worker was killed mid-request or the database was down longer than its settlement was "
        "retried: their generations are marked failed, nothing is charged. Run it every few minutes (compose.yaml's "
        "`holds` service; cron elsewhere; a 402 also releases the account's own). An age below the longest request "
        "deadline is refused. It also sums each finished day's charges per key (what key limits read instead of "
        "every ledger row)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--older-than-minutes", type=int, default=math.ceil(stale_hold_seconds() / 60))

    def handle(self, *args: Any, **options: Any) -> None:
        minutes = options["older_than_minutes"]
        longest = math.ceil(longest_request_seconds() / 60)
        if minutes < longest:
            raise CommandError(MSG_TOO_YOUNG.format(minutes=minutes, longest=longest))
        count = holds_expire(older_than_seconds=minutes * 60)
        self.stdout.write(f"released {count} stale holds")
        days = key_usage_roll_up()
        self.stdout.write(f"summed {days} finished days of key usage")
