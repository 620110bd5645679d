"""[X1, X5] `decrypt_all` opens many tokens at once, and opens exactly what MultiFernet opens:
the same text for a token a configured key made, nothing for one it did not, one that was
changed, cut short or is not a token at all, in any mix."""

import base64
import hmac
import os

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openbot.fields import decrypt_all

FIRST = Fernet.generate_key().decode()
SECOND = Fernet.generate_key().decode()
STRANGER = Fernet(Fernet.generate_key())
KEYRING = MultiFernet([Fernet(FIRST), Fernet(SECOND)])


def damaged(token: str, how: str, at: int) -> str:
    """`token` changed as `how` says, at a place `at` picks."""
    data = bytearray(base64.urlsafe_b64decode(token))
    where = at % len(data)
    if how == "flipped":
        data[where] ^= 1 << (at % 8)
    elif how == "cut":
        del data[where:]
    elif how == "grown":
        data[where:where] = bytes(16)
    return base64.urlsafe_b64encode(bytes(data)).decode()


def made_with(key: str, padded: bytes) -> str:
    """A token signed with `key` whose decrypted blocks are `padded`, padding and all: only
    someone with the key can make one whose padding is wrong or whose text is not UTF-8."""
    raw = base64.urlsafe_b64decode(key)
    iv = os.urandom(16)
    encryptor = Cipher(algorithms.AES(raw[16:]), modes.CBC(iv)).encryptor()
    body = b"\x80" + bytes(8) + iv + encryptor.update(padded) + encryptor.finalize()
    return base64.urlsafe_b64encode(body + hmac.digest(raw[:16], body, "sha256")).decode()


@st.composite
def tokens(draw: st.DrawFn) -> str:
    text = draw(st.text(max_size=80))
    maker = draw(st.sampled_from([Fernet(FIRST), Fernet(SECOND), STRANGER]))
    token = maker.encrypt(text.encode()).decode()
    how = draw(st.sampled_from(["kept", "kept", "flipped", "cut", "grown", "not a token"]))
    if how == "kept":
        return token
    if how == "not a token":
        return draw(st.text(max_size=120))
    return damaged(token, how, draw(st.integers(min_value=0, max_value=10_000)))


def opened_by_multifernet(token: str) -> str | None:
    try:
        return KEYRING.decrypt(token.encode()).decode()
    except (InvalidToken, ValueError):
        return None


@override_settings(OPENBOT_ENCRYPTION_KEYS=[FIRST, SECOND])
@given(st.lists(tokens(), max_size=12))
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_decrypt_all_opens_what_multifernet_opens(listed: list[str]) -> None:
    assert decrypt_all(listed) == [opened_by_multifernet(token) for token in listed]


@override_settings(OPENBOT_ENCRYPTION_KEYS=[FIRST, SECOND])
def test_decrypt_all_opens_tokens_of_both_keys_among_damaged_ones() -> None:
    texts = ["Anna's dog is called Bruno", "", "ü€ 🧠", "x" * 5_000]
    listed = [
        Fernet(FIRST if n % 2 else SECOND).encrypt(t.encode()).decode() for n, t in enumerate(texts)
    ]
    damaged_ones = [
        damaged(listed[0], "flipped", 40),
        STRANGER.encrypt(b"secret").decode(),
        made_with(FIRST, b"sixteen bytes, 0"),
        made_with(FIRST, b"\xff\xfe" + bytes([14]) * 14),
    ]
    assert [opened_by_multifernet(token) for token in damaged_ones[-2:]] == [None, None]
    assert decrypt_all([*listed, *damaged_ones]) == [*texts, None, None, None, None]
    assert decrypt_all([]) == []
