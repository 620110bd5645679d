"""Add or remove a channel member: prints {"ok": true}."""

from typing import Any

from django.core.management.base import CommandParser

from openbot.command_output import JsonCommand, lookup
from openbot.models import Channel, Person
from openbot.services import channel_member_add, channel_member_remove


class Command(JsonCommand):
    help = "Add (--add) or remove (--remove) a person from a channel."
    options_of_fields = {"person": "--add"}

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--channel", required=True)
        change = parser.add_mutually_exclusive_group(required=True)
        change.add_argument("--add")
        change.add_argument("--remove")

    def run(self, **options: Any) -> dict[str, Any]:
        channel = lookup(Channel, options["channel"], "--channel")
        if options["add"]:
            channel_member_add(channel=channel, person=lookup(Person, options["add"], "--add"))
        else:
            person = lookup(Person, options["remove"], "--remove")
            channel_member_remove(channel=channel, person=person)
        return {"ok": True}
