"""[X1] An encrypted text field: a thin Django field over pyca/cryptography's Fernet tokens,
which MultiFernet writes and rotates and `decrypt_all` reads, many at once.

Keys come from `OPENBOT_ENCRYPTION_KEYS` (the first encrypts, every key decrypts), independent
of `SECRET_KEY`, so keys rotate: add the new key first, run `manage.py reencrypt`, then drop
the old one. A value no configured key opens raises `EncryptionKeyError` — never ciphertext
returned as if it were text. `''` is stored as `''` and NULL as NULL.

[X5] Damaged data never takes a route down: a list reads its rows with `readable` or
`readable_values`, which open the rows' encrypted columns together (`decrypt_all`) and leave
out (and log by table, row id and column — never ciphertext, never content) a row that no key
opens. `stored_batches` reads columns as stored, for the commands that scan every one.
"""

import base64
import hmac
import logging
from collections.abc import Iterable, Iterator, Sequence
from functools import cache
from typing import Any, TypeVar

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from django.apps import apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.db import models
from django.db.models import ExpressionWrapper, F, QuerySet

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=models.Model)


class EncryptionKeyError(Exception):
    """A stored value cannot be opened with any configured key; names where, never what."""

    def __init__(self, *, table: str = "", column: str = "") -> None:
        self.table = table
        self.column = column
        where = f" of {table}.{column}" if table else ""
        super().__init__(
            f"an encrypted value{where} cannot be opened with any key in OPENBOT_ENCRYPTION_KEYS"
        )


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


@cache
def _key_halves() -> list[tuple[bytes, bytes]]:
    """Each configured key's signing and encryption keys (Fernet's spec), in order."""
    keyring()  # which checks the keys
    return [
        (raw[:16], raw[16:])
        for raw in (base64.urlsafe_b64decode(key) for key in settings.OPENBOT_ENCRYPTION_KEYS)
    ]


def _forget_keyring(*, setting: str, **kwargs: Any) -> None:
    if setting == "OPENBOT_ENCRYPTION_KEYS":
        keyring.cache_clear()
        _key_halves.cache_clear()


setting_changed.connect(_forget_keyring)


def encrypt(text: str) -> str:
    return keyring().encrypt(text.encode()).decode()


def decrypt(token: str) -> str:
    [text] = decrypt_all([token])
    if text is None:
        raise EncryptionKeyError()
    return text


# A Fernet token: version (1 byte), time (8), IV (16), ciphertext (16 or more, whole blocks),
# HMAC (32).
_FRAME = 1 + 8 + 16 + 32
_BLOCK = 16


def decrypt_all(tokens: Sequence[str]) -> list[str | None]:
    """The text of each of `tokens`, None for one no configured key opens: every read of an
    encrypted value goes through here (rotation is `rotate`), many at once a few times faster
    than one by one (search opens every vector a reader may see).

    Each token is checked as MultiFernet checks it: its HMAC under each key in turn. The
    tokens one key opens are then decrypted in one AES-CBC pass over them all, each token's
    IV placed before its ciphertext: in CBC a block's text is the decryption of the block
    XOR the block before it, so each token's blocks come out as Fernet's own pass gives them,
    and the block the IV becomes is dropped."""
    texts: list[str | None] = [None] * len(tokens)
    waiting: list[tuple[int, bytes]] = []
    for index, token in enumerate(tokens):
        try:
            data = base64.urlsafe_b64decode(token)
        except ValueError:
            continue
        whole_blocks = len(data) > _FRAME and (len(data) - _FRAME) % _BLOCK == 0
        if data[:1] == b"\x80" and whole_blocks:
            waiting.append((index, data))
    for signing, encryption in _key_halves() if waiting else []:
        signed, waiting = _signed_by(signing, waiting)
        pieces = [data[9:-32] for _, data in signed]
        decryptor = Cipher(algorithms.AES(encryption), modes.CBC(bytes(_BLOCK))).decryptor()
        plain = decryptor.update(b"".join(pieces)) + decryptor.finalize()
        start = 0
        for (index, _), piece in zip(signed, pieces, strict=True):
            padded = plain[start + _BLOCK : start + len(piece)]
            start += len(piece)
            texts[index] = _unpadded(padded)
    return texts


def _unpadded(padded: bytes) -> str | None:
    """The text of a token's decrypted blocks; None if their PKCS7 padding is wrong or the text
    is not UTF-8 (which only a holder of the key can make: a damaged row is left out [X5])."""
    size = padded[-1]
    if not (1 <= size <= _BLOCK and padded.endswith(bytes([size]) * size)):
        return None
    try:
        return padded[:-size].decode()
    except UnicodeDecodeError:
        return None


def _signed_by(
    signing: bytes, tokens: list[tuple[int, bytes]]
) -> tuple[list[tuple[int, bytes]], list[tuple[int, bytes]]]:
    """`tokens` whose HMAC `signing` makes, and the others."""
    signed: list[tuple[int, bytes]] = []
    others: list[tuple[int, bytes]] = []
    for index, data in tokens:
        mac = hmac.digest(signing, memoryview(data)[:-32], "sha256")
        (signed if hmac.compare_digest(mac, data[-32:]) else others).append((index, data))
    return signed, others


def rotate(token: str) -> str:
    """Re-encrypt `token` under the first key (keeps Fernet's timestamp)."""
    try:
        return keyring().rotate(token.encode()).decode()
    except InvalidToken:
        raise EncryptionKeyError() from None


class EncryptedTextField(models.TextField):
    """Text encrypted at rest. Never filter, order or index on it: ciphertext is random."""

    @property
    def column_name(self) -> str:
        """The column in the table (set once the field is on a model)."""
        assert self.column is not None
        return self.column

    def open(self, value: str | None) -> str | None:
        """The text of a stored value; `EncryptionKeyError` naming table and column if no
        configured key opens it."""
        if value is None or value == "":
            return value
        try:
            return decrypt(value)
        except EncryptionKeyError:
            raise EncryptionKeyError(
                table=self.model._meta.db_table, column=self.column_name
            ) from None

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> str | None:
        return self.open(value)

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        if value is None or value == "":
            return value
        return encrypt(value)


def encrypted_fields(model: type[models.Model]) -> list[EncryptedTextField]:
    """The encrypted columns of `model`'s own table."""
    return [
        field
        for field in model._meta.local_concrete_fields
        if isinstance(field, EncryptedTextField)
    ]


def encrypted_tables() -> list[tuple[type[models.Model], list[EncryptedTextField]]]:
    """Every model with a table of its own that holds encrypted columns, with those columns:
    found from the models, so a new encrypted column is scanned without being listed."""
    return [
        (model, fields)
        for model in apps.get_models()
        if model._meta.managed and not model._meta.proxy
        if (fields := encrypted_fields(model))
    ]


def stored(name: str) -> ExpressionWrapper:
    """Field `name` as stored: its ciphertext, which no field decrypts on the way out."""
    return ExpressionWrapper(F(name), output_field=models.TextField())


def stored_batches(
    model: type[models.Model], fields: Sequence[EncryptedTextField], batch_size: int
) -> Iterator[list[tuple[Any, ...]]]:
    """Every row of `model` as (primary key, the stored value of each of `fields`), in
    batches by primary key; decrypts nothing and holds no transaction between batches."""
    rows = model._base_manager.order_by("pk").values_list(
        "pk", *(stored(field.name) for field in fields)
    )
    last: Any = None
    while True:
        batch = list((rows if last is None else rows.filter(pk__gt=last))[:batch_size])
        if batch:
            yield batch
        if len(batch) < batch_size:
            return
        last = batch[-1][0]


# The name under which a row reader fetches an encrypted column as stored.
_SEALED = "_sealed_"


def _opened(
    fields: Sequence[EncryptedTextField], rows: Sequence[tuple[Any, Sequence[str | None]]]
) -> list[list[str | None] | None]:
    """The texts of each row's stored values (its id, a value of each of `fields`), all
    decrypted at once; None (and logged) for a row no key opens one of."""
    opened = iter(decrypt_all([value for _, values in rows for value in values if value]))
    texts_of: list[list[str | None] | None] = []
    for row_id, values in rows:
        texts = [next(opened) if value else value for value in values]
        shut = [
            field
            for field, value, text in zip(fields, values, texts, strict=True)
            if value and text is None
        ]
        if shut:
            # Where, never what: no ciphertext, no content.
            logger.warning(
                "left out a row no key opens: table=%s id=%s column=%s",
                shut[0].model._meta.db_table,
                row_id,
                shut[0].column_name,
            )
        texts_of.append(None if shut else texts)
    return texts_of


def readable(queryset: QuerySet[M]) -> list[M]:
    """The rows of `queryset` with their encrypted columns opened; a row no configured key
    opens is left out (and logged), so it never fails the whole list."""
    fields = encrypted_fields(queryset.model)
    rows = list(
        queryset.defer(*(field.name for field in fields)).annotate(
            **{_SEALED + field.name: stored(field.name) for field in fields}
        )
    )
    opened = _opened(
        fields,
        [(row.pk, [row.__dict__.pop(_SEALED + field.name) for field in fields]) for row in rows],
    )
    kept = []
    for row, texts in zip(rows, opened, strict=True):
        if texts is not None:
            for field, text in zip(fields, texts, strict=True):
                setattr(row, field.attname, text)
            kept.append(row)
    return kept


def sealed_values(queryset: QuerySet[Any], *names: str) -> QuerySet[Any]:
    """`queryset.values(*names)` with encrypted columns as stored, for `readable_rows`.
    `names` include the primary key."""
    model = queryset.model
    sealed = {field.name for field in encrypted_fields(model)}
    primary_key = model._meta.pk
    assert primary_key is not None and primary_key.name in names
    return queryset.values(
        *(name for name in names if name not in sealed),
        **{_SEALED + name: stored(name) for name in names if name in sealed},
    )


def readable_rows(
    model: type[models.Model], rows: Iterable[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Rows of `sealed_values` with their encrypted columns opened; a row no configured key
    opens is left out (and logged)."""
    listed = list(rows)
    primary_key = model._meta.pk
    assert primary_key is not None
    present = [
        field for field in encrypted_fields(model) if listed and _SEALED + field.name in listed[0]
    ]
    opened = _opened(
        present,
        [
            (row[primary_key.name], [row.pop(_SEALED + field.name) for field in present])
            for row in listed
        ],
    )
    kept = []
    for row, texts in zip(listed, opened, strict=True):
        if texts is not None:
            row.update(zip((field.name for field in present), texts, strict=True))
            kept.append(row)
    return kept


def readable_values(queryset: QuerySet[Any], *names: str) -> list[dict[str, Any]]:
    """`queryset.values(*names)` with encrypted columns opened; a row no configured key
    opens is left out (and logged). `names` include the primary key."""
    return readable_rows(queryset.model, sealed_values(queryset, *names))
