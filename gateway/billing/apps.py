from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "gateway.billing"
    label = "billing"
    verbose_name = "Credits and billing"

    def ready(self) -> None:
        # accounts sits below billing and shows a key's spend through these readers.
        from gateway.accounts.usage import KeyUsageReaders, key_usage_readers_register
        from gateway.billing import selectors

        key_usage_readers_register(
            KeyUsageReaders(
                usage=lambda key_id: selectors.key_usage(key_id=key_id),
                usage_in_window=lambda key: selectors.key_usage_in_window(key=key),
            )
        )
