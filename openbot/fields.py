"""[X1] An encrypted text field: a thin Django field over pyca/cryptography's MultiFernet.

Keys come from `OPENBOT_ENCRYPTION_KEYS` (the first encrypts, every key decrypts), independent
of `SECRET_KEY`, so keys rotate: add the new key first, run `manage.py reencrypt`, then drop
the old one. A value no configured key opens raises `EncryptionKeyError` — never ciphertext
returned as if it were text. `''` is stored as `''` and NULL as NULL.

[X5] Damaged data never takes a route down: a list reads its rows with `readable` or
`readable_values`, which open each row's encrypted columns one row at a time and leave out
(and log by table, row id and column — never ciphertext, never content) a row that no key
opens. `stored_batches` reads columns as stored, for the commands that scan every one.
"""

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache
from typing import Any, TypeVar

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
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
        raise EncryptionKeyError() from None


def decrypt(token: str) -> str:
    return _open(keyring().decrypt, token)


def rotate(token: str) -> str:
    """Re-encrypt `token` under the first key (keeps Fernet's timestamp)."""
    return _open(keyring().rotate, token)


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
    fields: Sequence[EncryptedTextField], row_id: Any, values: Sequence[str | None]
) -> list[str | None] | None:
    """The texts of one row's stored `values`; None (and logged) if no key opens one of them."""
    try:
        return [field.open(value) for field, value in zip(fields, values, strict=True)]
    except EncryptionKeyError as exc:
        # Where, never what: no ciphertext, no content.
        logger.warning(
            "left out a row no key opens: table=%s id=%s column=%s", exc.table, row_id, exc.column
        )
        return None


def readable(queryset: QuerySet[M]) -> list[M]:
    """The rows of `queryset` with their encrypted columns opened row by row; a row no
    configured key opens is left out (and logged), so it never fails the whole list."""
    fields = encrypted_fields(queryset.model)
    rows = queryset.defer(*(field.name for field in fields)).annotate(
        **{_SEALED + field.name: stored(field.name) for field in fields}
    )
    kept = []
    for row in rows:
        values = [row.__dict__.pop(_SEALED + field.name) for field in fields]
        texts = _opened(fields, row.pk, values)
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
    """Rows of `sealed_values` with their encrypted columns opened row by row; a row no
    configured key opens is left out (and logged)."""
    fields = encrypted_fields(model)
    primary_key = model._meta.pk
    assert primary_key is not None
    kept = []
    for row in rows:
        present = [field for field in fields if _SEALED + field.name in row]
        values = [row.pop(_SEALED + field.name) for field in present]
        texts = _opened(present, row[primary_key.name], values)
        if texts is not None:
            row.update(zip((field.name for field in present), texts, strict=True))
            kept.append(row)
    return kept


def readable_values(queryset: QuerySet[Any], *names: str) -> list[dict[str, Any]]:
    """`queryset.values(*names)` with encrypted columns opened row by row; a row no
    configured key opens is left out (and logged). `names` include the primary key."""
    return readable_rows(queryset.model, sealed_values(queryset, *names))
