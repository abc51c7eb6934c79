"""Credential shapes per provider kind, validated with precise messages (spec "Provider credential formats
for BYOK"). A structured credential may arrive as a JSON string (the spec's `key` is a string) or as JSON."""

import json
import re
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from byok.crypto import mask_secret

MAX_KEY_CHARS = 32_768
AZURE_RESOURCE_TYPES = ("ai_foundry", "openai")  # catalog type, deployment type (the default)
AZURE_CATALOG_FIELDS = {"api_key", "resource_name", "resource_type"}
AZURE_DEPLOYMENT_FIELDS = {"endpoint_url", "api_key", "model_id", "model_slug"}
RESOURCE_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9-]{1,62}$")
MODEL_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._:-]*$")
AWS_ACCESS_KEY_ID = re.compile(r"^(AKIA|ASIA)[A-Z0-9]{16}$")
AWS_REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d$")
GCP_REGION = re.compile(r"^[a-z]+-[a-z]+\d+$")
BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
VERTEX_REQUIRED = ("type", "project_id", "private_key_id", "private_key", "client_email")
VERTEX_OPTIONAL = ("client_id", "auth_uri", "token_uri", "auth_provider_x509_cert_url", "client_x509_cert_url",
                   "universe_domain", "region", "bucket")


class ShapeError(ValueError):
    """A credential that does not fit its provider's shape. The message never contains the secret."""


@dataclass(frozen=True)
class ParsedCredential:
    material: str  # what gets sealed: the key string, or canonical JSON for structured credentials
    label: str
    api_key: str  # the secret an adapter sends (first config's key for Azure)
    extra: dict | list | None = None


def parse_credential(*, kind: str, value) -> ParsedCredential:
    parser = {"api_key": _plain, "azure": _azure, "bedrock": _bedrock, "vertex": _vertex}[kind]
    if isinstance(value, str) and len(value) > MAX_KEY_CHARS:
        raise ShapeError(f"key is longer than {MAX_KEY_CHARS} characters")
    return parser(value)


def restore(*, kind: str, material: str) -> ParsedCredential:
    """A stored credential back in parsed form (it was validated when stored)."""
    return parse_credential(kind=kind, value=material)


def _json(value, expected: type, what: str):
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ShapeError(f"key must be {what} (a JSON string or JSON value)") from None
    if not isinstance(value, expected):
        raise ShapeError(f"key must be {what}")
    return value


def _string(config: dict, name: str, where: str) -> str:
    value = config.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ShapeError(f"{where}.{name} is required and must be a non-empty string")
    return value


def _plain(value) -> ParsedCredential:
    if not isinstance(value, str) or not value.strip():
        raise ShapeError("key must be a non-empty string")
    if any(ch.isspace() for ch in value.strip()) or value != value.strip():
        raise ShapeError("key must not contain whitespace")
    return ParsedCredential(material=value, label=mask_secret(value), api_key=value)


def _azure(value) -> ParsedCredential:
    configs = _json(value, list, "an array of Azure configs")
    if not configs:
        raise ShapeError("key must contain at least one Azure config")
    for index, config in enumerate(configs):
        where = f"key[{index}]"
        if not isinstance(config, dict):
            raise ShapeError(f"{where} must be an object")
        if "endpoint_url" in config and "resource_name" in config:
            raise ShapeError(f"{where} mixes a catalog config (resource_name) and a per-deployment config "
                             "(endpoint_url); use one per entry")
        if "endpoint_url" in config:
            _azure_deployment(config, where)
        elif "resource_name" in config:
            _azure_catalog(config, where)
        else:
            raise ShapeError(f"{where} needs resource_name (catalog config) or endpoint_url (per-deployment config)")
    material = json.dumps(configs, separators=(",", ":"), sort_keys=True)
    return ParsedCredential(material=material, label=mask_secret(configs[0]["api_key"]),
                            api_key=configs[0]["api_key"], extra=configs)


def _azure_catalog(config: dict, where: str) -> None:
    unknown = set(config) - AZURE_CATALOG_FIELDS
    if unknown:
        raise ShapeError(f"{where} has unknown fields {sorted(unknown)} for a catalog config")
    _string(config, "api_key", where)
    if not RESOURCE_NAME.match(_string(config, "resource_name", where)):
        raise ShapeError(f"{where}.resource_name must be the resource's subdomain (letters, digits, hyphens)")
    config.setdefault("resource_type", "openai")
    if config["resource_type"] not in AZURE_RESOURCE_TYPES:
        raise ShapeError(f"{where}.resource_type must be one of {list(AZURE_RESOURCE_TYPES)}")


def _azure_deployment(config: dict, where: str) -> None:
    unknown = set(config) - AZURE_DEPLOYMENT_FIELDS
    if unknown:
        raise ShapeError(f"{where} has unknown fields {sorted(unknown)} for a per-deployment config")
    for name in ("api_key", "model_id"):
        _string(config, name, where)
    url = urlsplit(_string(config, "endpoint_url", where))
    if url.scheme != "https" or not url.netloc:
        raise ShapeError(f"{where}.endpoint_url must be an https URL")
    if not url.path.rstrip("/").endswith("/chat/completions"):
        raise ShapeError(f"{where}.endpoint_url must be the full deployment URL ending in /chat/completions")
    if "api-version" not in parse_qs(url.query):
        raise ShapeError(f"{where}.endpoint_url must include the api-version query parameter")
    if not MODEL_SLUG.match(_string(config, "model_slug", where)):
        raise ShapeError(f"{where}.model_slug must be a gateway model id like <author>/<slug>")


def _bedrock(value) -> ParsedCredential:
    if isinstance(value, str) and not value.lstrip().startswith("{"):
        parsed = _plain(value)
        return ParsedCredential(material=parsed.material, label=parsed.label, api_key=parsed.api_key)
    config = _json(value, dict, "a Bedrock API key string or an object {accessKeyId, secretAccessKey, region}")
    unknown = set(config) - {"accessKeyId", "secretAccessKey", "region"}
    if unknown:
        raise ShapeError(f"key has unknown fields {sorted(unknown)}; expected accessKeyId, secretAccessKey, region")
    if not AWS_ACCESS_KEY_ID.match(_string(config, "accessKeyId", "key")):
        raise ShapeError("key.accessKeyId must look like an AWS access key id (AKIA… or ASIA…, 20 characters)")
    secret = _string(config, "secretAccessKey", "key")
    if len(secret) < 20:
        raise ShapeError("key.secretAccessKey is too short to be an AWS secret access key")
    if not AWS_REGION.match(_string(config, "region", "key")):
        raise ShapeError("key.region must be an AWS region such as us-east-1")
    material = json.dumps(config, separators=(",", ":"), sort_keys=True)
    return ParsedCredential(material=material, label=mask_secret(secret), api_key=secret, extra=config)


def _vertex(value) -> ParsedCredential:
    config = _json(value, dict, "the service-account JSON key object")
    unknown = set(config) - set(VERTEX_REQUIRED) - set(VERTEX_OPTIONAL)
    if unknown:
        raise ShapeError(f"key has unknown fields {sorted(unknown)} for a service-account key")
    for name in VERTEX_REQUIRED:
        _string(config, name, "key")
    for name in VERTEX_OPTIONAL:
        if name in config and not isinstance(config[name], str):
            raise ShapeError(f"key.{name} must be a string")
    if config["type"] != "service_account":
        raise ShapeError('key.type must be "service_account"')
    if "-----BEGIN PRIVATE KEY-----" not in config["private_key"]:
        raise ShapeError("key.private_key must be the PEM private key of the service account")
    if not EMAIL.match(config["client_email"]):
        raise ShapeError("key.client_email must be the service account's email")
    region = config.get("region")
    if region is not None and region != "global" and not GCP_REGION.match(region):
        raise ShapeError('key.region must be "global" or a region such as us-central1')
    if config.get("bucket") is not None:
        config["bucket"] = _bucket(config["bucket"])
    material = json.dumps(config, separators=(",", ":"), sort_keys=True)
    return ParsedCredential(material=material, label=mask_secret(config["private_key_id"]),
                            api_key=config["private_key_id"], extra=config)


def _bucket(value: str) -> str:
    name = value
    if value.startswith("gs://"):
        name = value[5:].rstrip("/")
        if "/" in name:
            raise ShapeError("key.bucket must name a bucket, not an object path (gs://<bucket> only)")
    if "/" in name or not BUCKET.match(name):
        raise ShapeError("key.bucket must be a bucket name or a gs://<bucket> URI, without an object path")
    return name
