"""Plain helpers shared by test modules (fixtures live in conftest.py): catalog data, scripted stand-in
behaviours and canonical requests."""

from routing.canonical import CanonicalRequest, Message, TextPart
from routing.models import Provider

# slug: (price per M prompt = completion, zdr, retains, trains, quantization, params, tiers)
PROVIDERS = {
    "alpha": (1, True, False, False, "fp8", ["temperature", "tools", "tool_choice", "max_tokens"],
              ["default", "priority", "flex"]),
    "beta": (2, False, True, False, "bf16", ["temperature", "max_tokens"], []),
    "gamma/us": (3, True, False, False, "fp16", ["temperature", "tools", "max_tokens", "response_format"], []),
    "gamma/eu": (4, False, True, True, "fp16", ["temperature", "tools", "max_tokens", "response_format"], []),
}

SERVICE_ACCOUNT = {
    "type": "service_account", "project_id": "proj-1", "private_key_id": "abcdef0123456789abcdef",
    "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEv...\n-----END PRIVATE KEY-----\n",
    "client_email": "gw@proj-1.iam.gserviceaccount.com", "client_id": "1234567890",
    "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": "https://oauth2.googleapis.com/token",
    "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
    "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/gw", "universe_domain": "googleapis.com",
}
DEPLOYMENT = {"endpoint_url": "https://acme.openai.azure.com/openai/deployments/gpt4o/chat/completions"
                              "?api-version=2024-10-21", "api_key": "azure-secret-key-123456", "model_id": "gpt4o",
              "model_slug": "openai/gpt-4o"}


def point(server, slug: str, script: str = "") -> None:
    provider = Provider.objects.get(slug=slug)
    provider.base_url = f"{server.url}{'/s/' + script if script else ''}/v1"
    provider.save()


def ask(text: str = "Hello", *, stream: bool = False, **fields) -> CanonicalRequest:
    return CanonicalRequest(model="standin-echo", input=(Message(role="user", content=(TextPart(text),)),),
                            stream=stream, **fields)
