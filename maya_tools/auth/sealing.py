"""AES-GCM sealing of each person's Door token under ``MAYA_CREDENTIAL_KEY`` (``cryptography``'s ``AESGCM``).

``MAYA_CREDENTIAL_KEY`` is one or more 32-byte keys written as 64 hex characters, comma-separated,
newest first. A token is sealed with the newest key and a fresh random 96-bit nonce; the associated
data names the person (issuer and subject), so a sealed row copied to another person does not open.
Each sealed value records the id of its key (the first 8 hex characters of the key's sha256, which
says nothing usable about the key), so a row written before a rotation opens with the older key
while the older key is still listed after the new one, until ``DoorCredentials.reencrypt`` moves it.

    AuthError
     └── CredentialError
          ├── CredentialKeyError   the setting is empty, not hex, or a key is not 32 bytes
          ├── KeyNotHeld           a row was sealed with a key the setting no longer lists
          └── SealBroken           the row does not open: another person's row, or altered
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from maya_tools.auth.errors import AuthError

SETTING = "MAYA_CREDENTIAL_KEY"
KEY_BYTES = 32
NONCE_BYTES = 12  # 96 bits, the size AES-GCM is specified for (NIST SP 800-38D)


class CredentialError(AuthError):
    """A stored Door credential cannot be sealed or opened; the message never holds a token or a key."""


class CredentialKeyError(CredentialError, ValueError):
    """``MAYA_CREDENTIAL_KEY`` is not a list of 32-byte hex keys; the message says which entry and why."""


class KeyNotHeld(CredentialError):
    """A row was sealed with key ``key_id``, which the configured keys do not include."""

    def __init__(self, key_id: str, held: list[str]) -> None:
        super().__init__(
            f"a stored Door token was encrypted with key id {key_id}, which {SETTING} does not hold "
            f"(it holds {', '.join(held)}): list that key after the newest one, comma-separated, until "
            "`reencrypt` has moved every row to the newest key"
        )
        self.key_id = key_id


class SealBroken(CredentialError):
    """The key is held but the row does not decrypt: it belongs to another person or was altered."""


def key_id(key: bytes) -> str:
    """The name a sealed row records for its key: the first 8 hex characters of the key's sha256."""
    return hashlib.sha256(key).hexdigest()[:8]


def parse_credential_keys(text: str | None) -> list[bytes]:
    """The keys of ``MAYA_CREDENTIAL_KEY``, newest first; raises ``CredentialKeyError`` naming the
    setting, the entry (by position, never its value) and what is wrong with it."""
    if text is None or not text.strip():
        raise CredentialKeyError(
            f"{SETTING} is empty: set it to a 32-byte key as 64 hex characters "
            '(python -c "import secrets; print(secrets.token_hex(32))")'
        )
    keys: list[bytes] = []
    entries = text.split(",")
    for position, entry in enumerate(entries, start=1):
        entry = entry.strip()
        where = f"{SETTING} entry {position} of {len(entries)}"
        if not entry:
            raise CredentialKeyError(f"{where} is empty: remove the extra comma")
        if len(entry) != 2 * KEY_BYTES:
            raise CredentialKeyError(
                f"{where} has {len(entry)} characters, not {2 * KEY_BYTES}: each key is 32 bytes as 64 hex characters"
            )
        try:
            key = bytes.fromhex(entry)
        except ValueError:
            raise CredentialKeyError(f"{where} is not hexadecimal: use only 0-9 and a-f") from None
        if key in keys:
            raise CredentialKeyError(f"{where} repeats an earlier key: list each key once")
        keys.append(key)
    return keys


@dataclass(frozen=True)
class Sealed:
    """A sealed value as a row keeps it: which key, the nonce, and the ciphertext with its GCM tag."""

    key_id: str
    nonce: bytes
    ciphertext: bytes


class Sealer:
    """Seals with the newest of ``keys`` and opens with whichever key a sealed value names."""

    def __init__(self, keys: list[bytes]) -> None:
        if not keys:
            raise CredentialKeyError(f"{SETTING} holds no key")
        if any(len(key) != KEY_BYTES for key in keys):
            raise CredentialKeyError(f"every key of {SETTING} must be {KEY_BYTES} bytes")
        self._keys = {key_id(key): AESGCM(key) for key in keys}
        self.newest = key_id(keys[0])

    @property
    def key_ids(self) -> list[str]:
        return list(self._keys)

    def seal(self, plaintext: bytes, associated: bytes) -> Sealed:
        nonce = os.urandom(NONCE_BYTES)
        return Sealed(self.newest, nonce, self._keys[self.newest].encrypt(nonce, plaintext, associated))

    def open(self, sealed: Sealed, associated: bytes) -> bytes:
        """The plaintext; ``KeyNotHeld`` when its key is not configured, ``SealBroken`` when it does not verify."""
        aead = self._keys.get(sealed.key_id)
        if aead is None:
            raise KeyNotHeld(sealed.key_id, self.key_ids)
        try:
            return aead.decrypt(sealed.nonce, sealed.ciphertext, associated)
        except InvalidTag:
            raise SealBroken(
                f"a stored Door token sealed with key id {sealed.key_id} does not decrypt for this person: "
                "it was written for someone else or altered; the person connects their Door token again"
            ) from None
