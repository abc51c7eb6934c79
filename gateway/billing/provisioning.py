"""A ready-to-use account: the accounts app's records plus the ledger's initial credits, in one transaction."""

from decimal import Decimal

from django.db import transaction

from gateway.accounts.models import Account, KeyKind, Workspace
from gateway.accounts.services import ProvisionedAccount, account_create, api_key_create
from gateway.billing.services import credits_topup


def account_provision(*, name: str, plan: str, credits: Decimal, reuse: bool = False) -> ProvisionedAccount:
    """An account with its default workspace, credits, one inference key and one management key."""
    with transaction.atomic():
        account = Account.objects.filter(name=name).first() if reuse else None
        if account is None:
            account = account_create(name=name, plan=plan)
            if credits > 0:
                credits_topup(account_id=account.id, amount=credits, note="initial credits")
        workspace = Workspace.objects.get(account=account, is_default=True)
        inference = api_key_create(account_id=account.id, name=f"{name} inference key")
        management = api_key_create(account_id=account.id, name=f"{name} management key", kind=KeyKind.MANAGEMENT)
    return ProvisionedAccount(
        account_id=account.id, workspace_id=workspace.id, inference_key=inference, management_key=management
    )
