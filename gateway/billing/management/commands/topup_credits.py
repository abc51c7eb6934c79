import json
import uuid
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from gateway.accounts.models import Account
from gateway.billing.selectors import credits_summary
from gateway.billing.services import credits_topup
from gateway.errors import GatewayError


class Command(BaseCommand):
    help = "Add credits (USD) to an account, by id or by name, and print the new totals as JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("account", help="Account id (UUID) or exact name")
        parser.add_argument("amount")
        parser.add_argument("--note", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            amount = Decimal(options["amount"])
        except InvalidOperation:
            raise CommandError("amount must be a number") from None
        account = _find(options["account"])
        try:
            credits_topup(account_id=account.id, amount=amount, note=options["note"])
        except GatewayError as exc:
            raise CommandError(exc.message) from exc
        summary = credits_summary(account_id=account.id)
        account.refresh_from_db(fields=["reserved"])
        self.stdout.write(
            json.dumps(
                {
                    "account_id": str(account.id),
                    "balance": str(summary.balance),
                    "reserved": str(account.reserved),  # held for requests in flight: not spendable, not in the ledger
                    "total_credits": str(summary.total_credits),
                    "total_usage": str(summary.total_usage),
                }
            )
        )


def _find(ref: str) -> Account:
    try:
        account = Account.objects.filter(pk=uuid.UUID(ref)).first()
    except ValueError:
        matches = list(Account.objects.filter(name=ref)[:2])
        if len(matches) > 1:
            raise CommandError(f"more than one account is named {ref!r}; use its id") from None
        account = matches[0] if matches else None
    if account is None:
        raise CommandError(f"no account {ref!r}")
    return account
