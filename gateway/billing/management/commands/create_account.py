import json
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from gateway.accounts.models import Plan
from gateway.billing.provisioning import account_provision


class Command(BaseCommand):
    help = (
        "Create an account (plan, initial credits) with its default workspace, one inference key and one "
        "management key, and print them as JSON. The plaintext keys are shown only here."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument("--plan", choices=Plan.values, default=Plan.PAY_AS_YOU_GO)
        parser.add_argument("--credits", default="0", help="Initial credits in USD")
        parser.add_argument(
            "--reuse", action="store_true", help="If an account with this name exists, issue new keys for it instead"
        )
        parser.add_argument("--text", action="store_true", help="Print readable lines instead of JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            credits = Decimal(options["credits"])
        except InvalidOperation:
            raise CommandError("--credits must be a number") from None
        if credits < 0:
            raise CommandError("--credits must not be negative")
        provisioned = account_provision(
            name=options["name"], plan=options["plan"], credits=credits, reuse=options["reuse"]
        )
        if options["text"]:
            self.stdout.write(
                f"Account:        {provisioned.account_id}\n"
                f"API key:        {provisioned.inference_key.plaintext}\n"
                f"Management key: {provisioned.management_key.plaintext}"
            )
            return
        self.stdout.write(
            json.dumps(
                {
                    "account_id": str(provisioned.account_id),
                    "workspace_id": str(provisioned.workspace_id),
                    "api_key": provisioned.inference_key.plaintext,
                    "api_key_hash": provisioned.inference_key.key.hash,
                    "management_key": provisioned.management_key.plaintext,
                    "management_key_hash": provisioned.management_key.key.hash,
                }
            )
        )
