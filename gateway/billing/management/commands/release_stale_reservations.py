from django.core.management.base import BaseCommand

from gateway.billing.services import credits_release_stale


class Command(BaseCommand):
    help = (
        "Release credit holds older than --older-than-minutes (default 360) that were never settled, e.g. "
        "after a worker was killed mid-request. Run it from cron; keep the age above the longest stream."
    )

    def add_arguments(self, parser):
        parser.add_argument("--older-than-minutes", type=int, default=360)

    def handle(self, *args, **options):
        count = credits_release_stale(older_than_seconds=options["older_than_minutes"] * 60)
        self.stdout.write(f"released {count} stale reservations")
