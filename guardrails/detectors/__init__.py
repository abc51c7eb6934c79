"""The builtin detectors of content filters, one module each, and the list of them.

Each builtin but the entity ones is a candidate pattern on RE2 (linear time whatever the text) confirmed by the
library that knows the format (libphonenumber, the Luhn check, the stdlib `ipaddress`); `person-name` and `address`
are found by a configured catalog model (detectors.entity).
"""

from __future__ import annotations

from guardrails.detectors.base import Builtin
from guardrails.detectors.credit_card import CREDIT_CARD
from guardrails.detectors.email import EMAIL
from guardrails.detectors.entity import ENTITY_SLUGS, entity_model
from guardrails.detectors.ip_address import IP_ADDRESS
from guardrails.detectors.phone import PHONE
from guardrails.detectors.prompt_injection import PROMPT_INJECTION
from guardrails.detectors.ssn import SSN

BUILTIN_SLUGS: tuple[str, ...] = (
    "email",
    "phone",
    "ssn",
    "credit-card",
    "ip-address",
    "person-name",
    "address",
    "regex-prompt-injection",
)

# The builtins found in this process (the entity ones are the model's).
BUILTINS: dict[str, Builtin] = {
    builtin.slug: builtin for builtin in (EMAIL, PHONE, SSN, CREDIT_CARD, IP_ADDRESS, PROMPT_INJECTION)
}


def builtin_problem(slug: str) -> str | None:
    """Why a builtin cannot be used here (None when it can): unknown slugs, and entity builtins without a model."""
    if slug not in BUILTIN_SLUGS:
        return f"unknown builtin {slug!r}; expected one of: {', '.join(BUILTIN_SLUGS)}"
    if slug in ENTITY_SLUGS and not entity_model():
        return (
            f"the {slug!r} builtin needs an entity-recognition model and this gateway has none configured "
            "(set GUARDRAILS_ENTITY_MODEL to a catalog model id)"
        )
    return None
