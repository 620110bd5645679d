"""Create a channel of members of an organization: prints {"id"}."""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from openbot.command_output import JsonCommand, lookup
from openbot.models import Organization, Person
from openbot.services import channel_create


class Command(JsonCommand):
    help = "Create a channel; --members is a comma-separated list of person ids."
    options_of_fields = {"person": "--members"}

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", required=True)
        parser.add_argument("--members", default="")
        parser.add_argument("--name", default="")

    def run(self, **options: Any) -> dict[str, Any]:
        organization = lookup(Organization, options["org"], "--org")
        ids = [part.strip() for part in options["members"].split(",") if part.strip()]
        if not ids:
            raise CommandError("--members: name at least one person")
        members = [lookup(Person, person_id, "--members") for person_id in ids]
        channel = channel_create(organization=organization, members=members, name=options["name"])
        return {"id": channel.id}
