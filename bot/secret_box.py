"""Secrets at rest (issue 24): what RankZero stores that would let a reader act as the bot (Slack bot,
user and refresh tokens) is encrypted with a key from the environment, ``RANKZERO_SECRET_KEY``.

The key is one or more Fernet keys (``cryptography``'s authenticated encryption: AES-128-CBC with an
HMAC-SHA256), comma-separated. The first encrypts; every one decrypts (MultiFernet), so a key is rotated
by putting the new one first, running ``rankzero secrets rotate`` (every stored token re-encrypted with it),
then dropping the old one. A stored value carries :data:`PREFIX`, so a value written before encryption
(plaintext) is recognised, still read, and encrypted by the next rotation.
"""

from __future__ import annotations

import base64
import binascii

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from bot.core.errors import ConfigurationError

#: What starts an encrypted value in the database (a Slack token never does: they start with xox).
PREFIX = "rzenc1:"
#: The variable that holds the keys.
KEY_VARIABLE = "RANKZERO_SECRET_KEY"


class SecretKeyError(ConfigurationError):
    """The key is missing, malformed, or does not decrypt what is stored (never says the key itself)."""


def new_key() -> str:
    """A fresh random key, as ``RANKZERO_SECRET_KEY`` wants it."""
    return Fernet.generate_key().decode("ascii")


def _parse(value: str) -> list[Fernet]:
    keys = [part.strip() for part in value.split(",")]
    if not any(keys):
        raise SecretKeyError(f"{KEY_VARIABLE} is empty: generate a key with `rankzero secrets new-key`")
    fernets = []
    for n, key in enumerate(keys, 1):
        try:
            raw = base64.urlsafe_b64decode(key.encode("ascii"))
        except (binascii.Error, UnicodeEncodeError):
            raw = b""
        if len(raw) != 32:
            # Which one, never what it is: the message may end up in a log.
            raise SecretKeyError(
                f"{KEY_VARIABLE}: key {n} of {len(keys)} is not a Fernet key (44 characters of url-safe "
                "base64, 32 bytes): generate one with `rankzero secrets new-key`"
            )
        fernets.append(Fernet(key.encode("ascii")))
    return fernets


class SecretBox:
    """Encrypts and decrypts stored secrets with the keys of ``RANKZERO_SECRET_KEY`` (see the module doc)."""

    def __init__(self, value: str) -> None:
        fernets = _parse(value)
        #: How many keys decrypt (the first one also encrypts).
        self.key_count = len(fernets)
        self._fernet = MultiFernet(fernets)

    @classmethod
    def required(cls, value: str | None, why: str) -> SecretBox:
        """The box for ``value``, or a :class:`SecretKeyError` saying that ``why`` needs the key."""
        if not value:
            raise SecretKeyError(
                f"{why} needs {KEY_VARIABLE} (tokens are stored encrypted): generate a key with "
                f"`rankzero secrets new-key`, set {KEY_VARIABLE} to it, and keep it safe: without it the "
                "stored tokens cannot be read"
            )
        return cls(value)

    @staticmethod
    def is_sealed(value: str | None) -> bool:
        """True for a value written by :meth:`seal`."""
        return value is not None and value.startswith(PREFIX)

    def seal(self, value: str | None) -> str | None:
        """``value`` encrypted with the first key (None stays None; an encrypted value is left as it is)."""
        if value is None or self.is_sealed(value):
            return value
        return PREFIX + self._fernet.encrypt(value.encode("utf-8")).decode("ascii")

    def open(self, value: str | None, what: str = "a stored secret") -> str | None:
        """The plaintext of ``value`` (a value stored before encryption is returned as it is)."""
        if value is None or not self.is_sealed(value):
            return value
        try:
            return self._fernet.decrypt(value[len(PREFIX) :].encode("ascii")).decode("utf-8")
        except (InvalidToken, UnicodeError):
            raise SecretKeyError(
                f"{KEY_VARIABLE} does not decrypt {what}: set the key it was written with (when rotating, "
                f"list the new key first and the old one after it, comma-separated)"
            ) from None

    def reseal(self, value: str | None, what: str = "a stored secret") -> str | None:
        """``value`` encrypted with the first key, whichever key (or none) it was stored with."""
        if value is None:
            return None
        if not self.is_sealed(value):
            return self.seal(value)
        try:
            rotated = self._fernet.rotate(value[len(PREFIX) :].encode("ascii"))
        except InvalidToken:
            self.open(value, what)  # raises the explanatory error
            raise
        return PREFIX + rotated.decode("ascii")
