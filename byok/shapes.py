"""Credential shapes per provider kind, validated with precise messages (spec "Provider credential formats
for BYOK"). A structured credential may arrive as a JSON string (the spec's `key` is a string) or as JSON.

Every field is also checked as text before it is stored: a value that ends up in an HTTP header or URL must be
printable ASCII without whitespace (`http.client` refuses anything else, and a NUL or CR/LF must never reach the
wire); a PEM private key may also hold spaces and line breaks. NUL, control characters and lone surrogates are
refused everywhere, with a 400 naming the field, never the value."""

import contextvars
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, parse_qs, urlsplit

from django.conf import settings

from byok.crypto import mask_secret
from gateway.netaddr import is_public_address, literal_address

MAX_KEY_CHARS = 32_768  # the whole credential, as sent or as stored (canonical JSON)
MAX_SECRET_CHARS = 8_192  # one header-bound secret (Bedrock API keys and AWS tokens run to ~2 KB)
MAX_URL_CHARS = 2_048
MAX_FIELD_CHARS = 256  # ids, names, regions, emails
MAX_PEM_CHARS = 16_384  # a 4096-bit RSA key in PEM is ~3.3 KB
MAX_AZURE_CONFIGS = 100
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
VERTEX_OPTIONAL = (
    "client_id",
    "auth_uri",
    "token_uri",
    "auth_provider_x509_cert_url",
    "client_x509_cert_url",
    "universe_domain",
    "region",
    "bucket",
)
VERTEX_URLS = ("auth_uri", "token_uri", "auth_provider_x509_cert_url", "client_x509_cert_url")
GCP_PROJECT = re.compile(r"[a-z0-9][a-z0-9.:_-]*")  # a URL path segment: no '/', '?', '#' or '%'
HEADER_SAFE = re.compile(r"[\x21-\x7e]*")  # visible ASCII: what a header value or URL may carry
PEM_SAFE = re.compile(r"[\x20-\x7e\r\n]*")
_lenient = contextvars.ContextVar("byok_shapes_lenient", default=False)


class ShapeError(ValueError):
    """A credential that does not fit its provider's shape. The message never contains the secret."""


@dataclass(frozen=True)
class ParsedCredential:
    material: str  # what gets sealed: the key string, or canonical JSON for structured credentials
    label: str
    api_key: str  # the secret an adapter sends (first config's key for Azure)
    extra: dict[str, Any] | list[dict[str, Any]] | None = None
    serves_models: list[str] | None = None  # Azure: what its configs serve (see ByokKey.serves_models)


def parse_credential(*, kind: str, value: Any) -> ParsedCredential:
    parser = {"api_key": _plain, "azure": _azure, "bedrock": _bedrock, "vertex": _vertex}[kind]
    if isinstance(value, str) and len(value) > MAX_KEY_CHARS:
        raise ShapeError(f"key is longer than {MAX_KEY_CHARS} characters")
    parsed = parser(value)
    if len(parsed.material) > MAX_KEY_CHARS and not _lenient.get():
        raise ShapeError(f"key is longer than {MAX_KEY_CHARS} characters")
    return parsed


def restore(*, kind: str, material: str) -> ParsedCredential:
    """A stored credential back in parsed form. It was validated when stored, perhaps under older rules: the
    text checks are skipped here, so a key stored before them still loads (and its send fails as an attempt)."""
    token = _lenient.set(True)
    try:
        return parse_credential(kind=kind, value=material)
    finally:
        _lenient.reset(token)


def operator_credential(*, kind: str, value: str) -> ParsedCredential:
    """The operator's own credential for a provider (admin): sent as is, so a plain header-safe key, except a
    Vertex service-account JSON (exchanged for a token); the same checks as a customer's key."""
    if kind == "vertex" and isinstance(value, str) and value.lstrip().startswith("{"):
        return parse_credential(kind="vertex", value=value)
    return parse_credential(kind="api_key", value=value)


def check_text(value: str, field: str, *, cap: int, multiline: bool = False) -> str:
    """`value` when it is safe to store and send; ShapeError naming `field` (never the value) otherwise.
    Header/URL-bound text: visible ASCII only. Multiline (PEM): also spaces, CR and LF."""
    if _lenient.get():
        return value
    if len(value) > cap:
        raise ShapeError(f"{field} is longer than {cap} characters")
    if (PEM_SAFE if multiline else HEADER_SAFE).fullmatch(value):
        return value
    for position, char in enumerate(value):
        code = ord(char)
        if 0xD800 <= code <= 0xDFFF:
            problem = "contains a lone surrogate (not valid Unicode)"
        elif code == 0:
            problem = "contains a NUL character"
        elif (multiline and char in "\r\n") or (0x20 <= code <= 0x7E and (multiline or code != 0x20)):
            continue
        elif char in "\r\n\t" or code == 0x20:
            problem = "must not contain whitespace or line breaks"
        elif code < 0x20 or 0x7F <= code < 0xA0 or char in "\u2028\u2029":
            problem = "contains a control character"
        elif char.isspace():
            problem = "must not contain whitespace or line breaks"
        else:
            problem = "must be printable ASCII (it is sent in an HTTP header or URL)"
        raise ShapeError(f"{field} {problem} (at position {position})")
    return value  # unreachable: the pattern failed, so some character did


def _fullmatch(pattern: re.Pattern[str], value: str) -> bool:
    """The whole value matches (`$` alone lets a trailing newline through); stored values load as before."""
    return bool(pattern.match(value) if _lenient.get() else pattern.fullmatch(value))


def _json(value: Any, expected: type, what: str) -> Any:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise ShapeError(f"key must be {what} (a JSON string or JSON value)") from None
    if not isinstance(value, expected):
        raise ShapeError(f"key must be {what}")
    return value


def _string(
    config: dict[str, Any],
    name: str,
    where: str,
    *,
    cap: int = MAX_FIELD_CHARS,
    multiline: bool = False,
    text: bool = True,
) -> str:
    """A required string field, checked as text (`text=False`: the caller matches it against a pattern of
    visible ASCII characters, whose message is more precise)."""
    value = config.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ShapeError(f"{where}.{name} is required and must be a non-empty string")
    return check_text(value, f"{where}.{name}", cap=cap, multiline=multiline) if text else value


def _public_host(url: SplitResult, field: str) -> None:
    """A customer's URL must not name a loopback, private or link-local host literally (the outbound guard refuses
    it at connect time anyway, whatever its name resolves to: this says so when the key is saved)."""
    if settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS:
        return
    host = (url.hostname or "").lower().rstrip(".")
    address = literal_address(host)
    if host == "localhost" or host.endswith(".localhost") or (address is not None and not is_public_address(address)):
        raise ShapeError(f"{field} must be a public address (loopback, private and link-local hosts are refused)")


def _url(value: str, field: str, *, schemes: tuple[str, ...]) -> SplitResult:
    check_text(value, field, cap=MAX_URL_CHARS)
    try:
        url = urlsplit(value)
        url.port  # noqa: B018 -- raises ValueError on a port out of range
    except ValueError:
        raise ShapeError(f"{field} is not a valid URL") from None
    if url.scheme not in schemes or not url.hostname:
        raise ShapeError(f"{field} must be an {' or '.join(schemes)} URL")
    return url


def _plain(value: Any) -> ParsedCredential:
    if not isinstance(value, str) or not value.strip():
        raise ShapeError("key must be a non-empty string")
    check_text(value, "key", cap=MAX_SECRET_CHARS)
    if any(ch.isspace() for ch in value.strip()) or value != value.strip():
        raise ShapeError("key must not contain whitespace")
    return ParsedCredential(material=value, label=mask_secret(value), api_key=value)


def _azure(value: Any) -> ParsedCredential:
    configs = _json(value, list, "an array of Azure configs")
    if not configs:
        raise ShapeError("key must contain at least one Azure config")
    if len(configs) > MAX_AZURE_CONFIGS:
        raise ShapeError(f"key must contain at most {MAX_AZURE_CONFIGS} Azure configs")
    for index, config in enumerate(configs):
        where = f"key[{index}]"
        if not isinstance(config, dict):
            raise ShapeError(f"{where} must be an object")
        if "endpoint_url" in config and "resource_name" in config:
            raise ShapeError(
                f"{where} mixes a catalog config (resource_name) and a per-deployment config "
                "(endpoint_url); use one per entry"
            )
        if "endpoint_url" in config:
            _azure_deployment(config, where)
        elif "resource_name" in config:
            _azure_catalog(config, where)
        else:
            raise ShapeError(f"{where} needs resource_name (catalog config) or endpoint_url (per-deployment config)")
    material = json.dumps(configs, separators=(",", ":"), sort_keys=True)
    return ParsedCredential(
        material=material,
        label=mask_secret(configs[0]["api_key"]),
        api_key=configs[0]["api_key"],
        extra=configs,
        serves_models=azure_serves(configs),
    )


def azure_serves(configs: list[dict[str, Any]]) -> list[str]:
    """The model slugs of the per-deployment configs, and '*' when a catalog config serves any other model."""
    models = {config["model_slug"] for config in configs if config.get("endpoint_url") and config.get("model_slug")}
    return sorted(models) + (["*"] if any(config.get("resource_name") for config in configs) else [])


def _azure_catalog(config: dict[str, Any], where: str) -> None:
    unknown = set(config) - AZURE_CATALOG_FIELDS
    if unknown:
        raise ShapeError(f"{where} has unknown fields {sorted(unknown)} for a catalog config")
    _string(config, "api_key", where, cap=MAX_SECRET_CHARS)
    if not _fullmatch(RESOURCE_NAME, _string(config, "resource_name", where, text=False)):
        raise ShapeError(f"{where}.resource_name must be the resource's subdomain (letters, digits, hyphens)")
    config.setdefault("resource_type", "openai")
    if config["resource_type"] not in AZURE_RESOURCE_TYPES:
        raise ShapeError(f"{where}.resource_type must be one of {list(AZURE_RESOURCE_TYPES)}")


def _azure_deployment(config: dict[str, Any], where: str) -> None:
    unknown = set(config) - AZURE_DEPLOYMENT_FIELDS
    if unknown:
        raise ShapeError(f"{where} has unknown fields {sorted(unknown)} for a per-deployment config")
    _string(config, "api_key", where, cap=MAX_SECRET_CHARS)
    _string(config, "model_id", where)
    url = _url(_string(config, "endpoint_url", where, cap=MAX_URL_CHARS), f"{where}.endpoint_url", schemes=("https",))
    _public_host(url, f"{where}.endpoint_url")
    if not url.path.rstrip("/").endswith("/chat/completions"):
        raise ShapeError(f"{where}.endpoint_url must be the full deployment URL ending in /chat/completions")
    if "api-version" not in parse_qs(url.query):
        raise ShapeError(f"{where}.endpoint_url must include the api-version query parameter")
    if not _fullmatch(MODEL_SLUG, _string(config, "model_slug", where, text=False)):
        raise ShapeError(f"{where}.model_slug must be a gateway model id like <author>/<slug>")


def _bedrock(value: Any) -> ParsedCredential:
    if isinstance(value, str) and not value.lstrip().startswith("{"):
        parsed = _plain(value)
        return ParsedCredential(material=parsed.material, label=parsed.label, api_key=parsed.api_key)
    config = _json(value, dict, "a Bedrock API key string or an object {accessKeyId, secretAccessKey, region}")
    unknown = set(config) - {"accessKeyId", "secretAccessKey", "region"}
    if unknown:
        raise ShapeError(f"key has unknown fields {sorted(unknown)}; expected accessKeyId, secretAccessKey, region")
    if not _fullmatch(AWS_ACCESS_KEY_ID, _string(config, "accessKeyId", "key", text=False)):
        raise ShapeError("key.accessKeyId must look like an AWS access key id (AKIA… or ASIA…, 20 characters)")
    secret = _string(config, "secretAccessKey", "key", cap=MAX_SECRET_CHARS)
    if len(secret) < 20:
        raise ShapeError("key.secretAccessKey is too short to be an AWS secret access key")
    if not _fullmatch(AWS_REGION, _string(config, "region", "key", text=False)):
        raise ShapeError("key.region must be an AWS region such as us-east-1")
    material = json.dumps(config, separators=(",", ":"), sort_keys=True)
    return ParsedCredential(material=material, label=mask_secret(secret), api_key=secret, extra=config)


def _vertex(value: Any) -> ParsedCredential:
    config = _json(value, dict, "the service-account JSON key object")
    unknown = set(config) - set(VERTEX_REQUIRED) - set(VERTEX_OPTIONAL)
    if unknown:
        raise ShapeError(f"key has unknown fields {sorted(unknown)} for a service-account key")
    for name in VERTEX_REQUIRED:
        if name == "private_key":
            _string(config, name, "key", cap=MAX_PEM_CHARS, multiline=True)
        else:
            _string(config, name, "key", cap=MAX_URL_CHARS if name in VERTEX_URLS else MAX_FIELD_CHARS)
    for name in VERTEX_OPTIONAL:
        if name in config and not isinstance(config[name], str):
            raise ShapeError(f"key.{name} must be a string")
        if name in config:  # each one ends up in a URL, a token request or a JWT header
            check_text(config[name], f"key.{name}", cap=MAX_URL_CHARS if name in VERTEX_URLS else MAX_FIELD_CHARS)
    for name in VERTEX_URLS:
        if config.get(name):
            _url(config[name], f"key.{name}", schemes=("https", "http"))
    if config["type"] != "service_account":
        raise ShapeError('key.type must be "service_account"')
    if "-----BEGIN PRIVATE KEY-----" not in config["private_key"]:
        raise ShapeError("key.private_key must be the PEM private key of the service account")
    if not _fullmatch(GCP_PROJECT, config["project_id"]):
        raise ShapeError("key.project_id must be a Google Cloud project id (lowercase letters, digits, hyphens)")
    if not _fullmatch(EMAIL, config["client_email"]):
        raise ShapeError("key.client_email must be the service account's email")
    region = config.get("region")
    if region is not None and region != "global" and not _fullmatch(GCP_REGION, region):
        raise ShapeError('key.region must be "global" or a region such as us-central1')
    if config.get("bucket") is not None:
        config["bucket"] = _bucket(config["bucket"])
    material = json.dumps(config, separators=(",", ":"), sort_keys=True)
    return ParsedCredential(
        material=material, label=mask_secret(config["private_key_id"]), api_key=config["private_key_id"], extra=config
    )


def _bucket(value: str) -> str:
    name = value
    if value.startswith("gs://"):
        name = value[5:].rstrip("/")
        if "/" in name:
            raise ShapeError("key.bucket must name a bucket, not an object path (gs://<bucket> only)")
    if "/" in name or not _fullmatch(BUCKET, name):
        raise ShapeError("key.bucket must be a bucket name or a gs://<bucket> URI, without an object path")
    return name
