from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from routing.services import CatalogError, catalog_load

DEFAULT = Path(__file__).resolve().parents[2] / "catalog" / "default.yaml"


class Command(BaseCommand):
    help = "Load (upsert) a declarative catalog file of providers, models and endpoints. Idempotent."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="*", help=f"YAML or JSON catalog files (default: {DEFAULT.name})")

    def handle(self, *args: Any, **options: Any) -> None:
        for path in options["paths"] or [str(DEFAULT)]:
            try:
                data = yaml.safe_load(Path(path).read_text())
            except (OSError, yaml.YAMLError) as exc:
                raise CommandError(f"{path}: {exc}") from exc
            try:
                result = catalog_load(data=data or {})
            except CatalogError as exc:
                raise CommandError(f"{path}: {exc}") from exc
            self.stdout.write(
                f"{path}: {result.providers} providers, {result.models} models, {result.endpoints} endpoints, "
                f"{result.search_engines} search engines"
            )
