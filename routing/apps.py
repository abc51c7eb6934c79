from django.apps import AppConfig


class RoutingConfig(AppConfig):
    name = "routing"
    verbose_name = "Catalog and routing"

    def ready(self) -> None:
        # byok sits below routing and validates BYOK keys against the catalog through these lookups.
        from byok.catalog import CatalogLookups, catalog_lookups_register
        from routing import selectors

        catalog_lookups_register(
            CatalogLookups(
                provider_credential_kind=lambda slug: selectors.provider_credential_kind(provider_slug=slug),
                model_exists=lambda model_id: selectors.model_exists(model_id=model_id),
            )
        )
