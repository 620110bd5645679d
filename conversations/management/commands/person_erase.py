"""`manage.py person_erase --org O --person P [--dry-run]`: erase a person from an
organization on request; prints the receipt, counts per store."""

from typing import Any

from django.core.management.base import CommandParser

from conversations.erase import person_erase
from openbot.command_output import JsonCommand, lookup
from openbot.models import Organization, Person


class Command(JsonCommand):
    help = (
        "Erase a person from an organization: purge from:<person> with every copy in every "
        "pool its chats wrote to, delete their chats' history, replace their words in other "
        "people's chats with a marker, revoke their tokens, end their memberships. Prints a "
        "receipt of counts per store; --dry-run prints it and changes nothing. Running it "
        "again after a crash finishes the rest."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", required=True, help="the organization")
        parser.add_argument("--person", required=True, help="the person to erase")
        parser.add_argument("--dry-run", action="store_true", help="count, change nothing")

    def run(self, **options: Any) -> dict[str, Any]:
        organization = lookup(Organization, options["org"], "--org")
        person = lookup(Person, options["person"], "--person")
        receipt = person_erase(person=person, organization=organization, dry_run=options["dry_run"])
        return {"dryRun": options["dry_run"], **receipt}
