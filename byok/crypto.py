"""Secrets at rest: AES-256-GCM under a keyring from the environment, bound to their row.

GATEWAY_ENCRYPTION_KEYS = "k2:<base64 32 bytes>,k1:<base64 32 bytes>": the first key encrypts, every
key decrypts, so keys rotate by prepending a new one, re-encrypting (`manage.py rotate_secrets`) and
then dropping the old one. The associated data ties a ciphertext to its table and row, so a blob
copied onto another row does not decrypt.
"""

import base64
import binascii
import os
from dataclasses import dataclass
from functools import lru_cache

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings

NONCE_BYTES = 12


class SecretsError(Exception):
    """Encryption is misconfigured or a ciphertext does not decrypt. Never carries key material."""


@dataclass(frozen=True)
class Sealed:
    key_id: str
    blob: bytes  # nonce || ciphertext+tag


@lru_cache(maxsize=8)
def _parse_keyring(spec: str) -> tuple[tuple[str, bytes], ...]:
    keyring = []
    for entry in filter(None, (part.strip() for part in spec.split(","))):
        key_id, sep, encoded = entry.partition(":")
        if not sep or not key_id:
            raise SecretsError("GATEWAY_ENCRYPTION_KEYS entries must look like 'key_id:base64key'")
        try:
            raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        except (binascii.Error, ValueError):
            raise SecretsError(f"GATEWAY_ENCRYPTION_KEYS: key {key_id!r} is not base64") from None
        if len(raw) != 32:
            raise SecretsError(f"GATEWAY_ENCRYPTION_KEYS: key {key_id!r} must be 32 bytes (AES-256)")
        keyring.append((key_id, raw))
    return tuple(keyring)


def keyring() -> tuple[tuple[str, bytes], ...]:
    ring = _parse_keyring(settings.GATEWAY_ENCRYPTION_KEYS)
    if not ring:
        raise SecretsError("GATEWAY_ENCRYPTION_KEYS is not set; stored secrets cannot be encrypted")
    return ring


def current_key_id() -> str:
    return keyring()[0][0]


def _utf8(text: str) -> bytes:
    """UTF-8 that cannot fail: a lone surrogate (callers refuse them first) round-trips instead of raising."""
    return text.encode("utf-8", "surrogatepass")


def seal(plaintext: str, *, aad: str) -> Sealed:
    key_id, key = keyring()[0]
    nonce = os.urandom(NONCE_BYTES)
    return Sealed(key_id=key_id, blob=nonce + AESGCM(key).encrypt(nonce, _utf8(plaintext), _utf8(aad)))


def unseal(sealed: Sealed, *, aad: str) -> str:
    """The plaintext, or SecretsError: never an empty or wrong secret."""
    key = dict(keyring()).get(sealed.key_id)
    if key is None:
        raise SecretsError(f"no key {sealed.key_id!r} in GATEWAY_ENCRYPTION_KEYS to decrypt this secret")
    blob = bytes(sealed.blob)
    if len(blob) <= NONCE_BYTES + 16:
        raise SecretsError("stored secret is truncated")
    try:
        plaintext = AESGCM(key).decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], _utf8(aad))
    except InvalidTag:
        raise SecretsError("stored secret failed authentication (wrong key, row or tampered data)") from None
    if not plaintext:
        raise SecretsError("stored secret is empty")
    return plaintext.decode("utf-8", "surrogatepass")


def reseal(sealed: Sealed, *, aad: str) -> Sealed:
    """The same secret sealed under the keyring's newest key (the plaintext does not leave this module)."""
    return seal(unseal(sealed, aad=aad), aad=aad)


def mask_secret(secret: str, *, keep: int = 4) -> str:
    """A label for a secret: its first and last few characters, never more than a third of it."""
    keep = max(1, min(keep, len(secret) // 6))
    return f"{secret[:keep]}...{secret[-keep:]}" if len(secret) >= 8 else "***"
