from django.core.management.base import BaseCommand

from gateway.billing.services import STALE_HOLD_SECONDS, holds_expire, key_usage_roll_up


class Command(BaseCommand):
    help = (
        "Release credit holds older than --older-than-minutes (default 360) that were never settled, e.g. after a "
        "worker was killed mid-request: their generations are marked failed, nothing is charged. Run it from cron "
        "(a 402 also releases the account's own); keep the age above the longest stream. It also sums each finished "
        "day's charges per key (what key limits read instead of every ledger row)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--older-than-minutes", type=int, default=STALE_HOLD_SECONDS // 60)

    def handle(self, *args, **options):
        count = holds_expire(older_than_seconds=options["older_than_minutes"] * 60)
        self.stdout.write(f"released {count} stale holds")
        days = key_usage_roll_up()
        self.stdout.write(f"summed {days} finished days of key usage")
