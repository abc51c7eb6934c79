"""API key material: generation, hashing and masking. The plaintext never leaves this module
except as the return value of `key_generate`, shown to its creator once."""

import hashlib
import secrets

KEY_PREFIX = "sk-gw-v1-"
_KIND_TAG = {"inference": "inf", "management": "mgmt"}


def key_generate(*, kind: str) -> str:
    """A new key: recognisable prefix, kind tag and 256 bits of CSPRNG randomness."""
    return f"{KEY_PREFIX}{_KIND_TAG[kind]}-{secrets.token_urlsafe(32)}"


def key_hash(plaintext: str) -> str:
    """SHA-256 hex digest (64 lowercase hex): how keys are stored and referred to."""
    return hashlib.sha256(plaintext.encode()).hexdigest()


def key_mask(plaintext: str) -> str:
    """A label that identifies a key without revealing it: prefix, kind and the last 3 characters."""
    head = "-".join(plaintext.split("-", 4)[:4])  # sk-gw-v1-<kind>; the random part may contain "-"
    return f"{head}-...{plaintext[-3:]}"
