"""[X1] An encrypted text field: a thin Django field over pyca/cryptography's MultiFernet.

Keys come from `OPENBOT_ENCRYPTION_KEYS` (the first encrypts, every key decrypts), independent
of `SECRET_KEY`, so keys rotate: add the new key first, run `manage.py reencrypt`, then drop
the old one. A value no configured key opens raises `EncryptionKeyError` — never ciphertext
returned as if it were text. `''` is stored as `''` and NULL as NULL.
"""

from collections.abc import Callable
from functools import cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.db import models


class EncryptionKeyError(Exception):
    """A stored value cannot be opened with any configured key."""


@cache
def keyring() -> MultiFernet:
    keys = settings.OPENBOT_ENCRYPTION_KEYS
    if not keys:
        raise ImproperlyConfigured("OPENBOT_ENCRYPTION_KEYS is empty [X1]")
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except ValueError as exc:
        raise ImproperlyConfigured(
            "OPENBOT_ENCRYPTION_KEYS holds a value that is not a Fernet key"
        ) from exc


def _forget_keyring(*, setting: str, **kwargs: Any) -> None:
    if setting == "OPENBOT_ENCRYPTION_KEYS":
        keyring.cache_clear()


setting_changed.connect(_forget_keyring)


def encrypt(text: str) -> str:
    return keyring().encrypt(text.encode()).decode()


def _open(operation: Callable[[bytes], bytes], token: str) -> str:
    try:
        return operation(token.encode()).decode()
    except InvalidToken:
        raise EncryptionKeyError(
            "an encrypted value cannot be opened with any key in OPENBOT_ENCRYPTION_KEYS"
        ) from None


def decrypt(token: str) -> str:
    return _open(keyring().decrypt, token)


def rotate(token: str) -> str:
    """Re-encrypt `token` under the first key (keeps Fernet's timestamp)."""
    return _open(keyring().rotate, token)


class EncryptedTextField(models.TextField):
    """Text encrypted at rest. Never filter, order or index on it: ciphertext is random."""

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> str | None:
        if value is None or value == "":
            return value
        return decrypt(value)

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        if value is None or value == "":
            return value
        return encrypt(value)
