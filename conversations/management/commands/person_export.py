"""`manage.py person_export --org O --person P`: the export GET /v1/me/export answers the
person, written to standard output as it is read."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from conversations.export import person_export
from openbot.command_output import lookup
from openbot.models import Membership, Organization, Person


class Command(BaseCommand):
    help = (
        "Write everything about a person in an organization as one JSON document: their "
        "channels, the memory entries they may see of every bot they may read, their chats "
        "with items, enrichments and learning runs, and their tokens' metadata."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", required=True, help="the organization")
        parser.add_argument("--person", required=True, help="a person of that organization")

    def handle(self, *args: Any, **options: Any) -> None:
        organization = lookup(Organization, options["org"], "--org")
        person = lookup(Person, options["person"], "--person")
        if not Membership.objects.filter(organization=organization, person=person).exists():
            raise CommandError(f"--person: {person.id} is not a member of {organization.id}")
        for piece in person_export(person=person, organization=organization):
            self.stdout.write(piece, ending="")
