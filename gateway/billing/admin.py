from decimal import Decimal

from django import forms
from django.contrib import admin

from gateway.accounts.models import Account
from gateway.billing.models import EntryKind, LedgerEntry
from gateway.billing.services import credits_topup

MAX_ENTRY = Decimal("1000000000")  # one top-up or refund, USD
MAX_BALANCE = Decimal("1e12")  # Account.balance is numeric(24, 12)


class CreditTopUpForm(forms.ModelForm):
    kind = forms.ChoiceField(choices=[(EntryKind.TOPUP, "Top-up"), (EntryKind.REFUND, "Refund")])
    amount = forms.DecimalField(
        max_digits=24,
        decimal_places=12,
        min_value=Decimal("0.000000000001"),
        max_value=MAX_ENTRY,
        help_text=f"USD, more than 0 and at most {MAX_ENTRY:,}",
    )

    class Meta:
        model = LedgerEntry
        fields = ("account", "kind", "amount", "note")

    def clean(self):
        """What `credits_topup` and the balance column would refuse, refused here (a form error, not a 500)."""
        super().clean()
        cleaned = self.cleaned_data
        account, amount = cleaned.get("account"), cleaned.get("amount")
        if account is not None and amount is not None:
            balance = Account.objects.filter(pk=account.pk).values_list("balance", flat=True).first()
            if balance is not None and balance + amount >= MAX_BALANCE:
                self.add_error("amount", f"the balance would exceed {MAX_BALANCE - Decimal('1e-12'):f} USD")
        return cleaned


@admin.register(LedgerEntry)
class LedgerEntryAdmin(admin.ModelAdmin):
    """The ledger is insert-only: staff add top-ups and refunds; nothing is edited or deleted."""

    list_display = ("created_at", "account", "kind", "amount", "api_key", "generation_id", "is_byok")
    list_filter = ("kind", "is_byok")
    search_fields = ("account__name", "generation_id", "note")
    form = CreditTopUpForm

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in LedgerEntry._meta.fields] if obj else []

    def has_change_permission(self, request, obj=None):
        return obj is None

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        entry = credits_topup(
            account_id=obj.account_id,
            amount=form.cleaned_data["amount"],
            note=obj.note,
            kind=form.cleaned_data["kind"],
        )
        obj.pk = entry.pk
        obj._state.adding = False
