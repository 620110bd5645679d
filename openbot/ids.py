"""Public ids: a prefix that names the kind of object and random hex (`bot_3f9a…`)."""

import secrets


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(10)}"


def organization_id() -> str:
    return new_id("o")


def person_id() -> str:
    return new_id("u")


def bot_id() -> str:
    return new_id("bot")


def channel_id() -> str:
    return new_id("ch")
