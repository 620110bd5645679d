"""Let learning use a channel's group chats, or not: prints the channel, as the route
`PATCH /v1/organizations/:orgId/channels/:channelId` answers it."""

from typing import Any

from django.core.management.base import CommandParser

from openbot.apis import ChannelOutput
from openbot.command_output import JsonCommand, lookup
from openbot.models import Organization
from openbot.services import channel_learning_set


class Command(JsonCommand):
    help = (
        "Set whether learning may use what is said in a channel's group chats (on/off); what "
        "was learned before stays."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", required=True)
        parser.add_argument("--channel", required=True)
        parser.add_argument("--learning", required=True, choices=["on", "off"])

    def run(self, **options: Any) -> dict[str, Any]:
        organization = lookup(Organization, options["org"], "--org")
        channel = channel_learning_set(
            organization=organization,
            channel_id=options["channel"],
            learning=options["learning"] == "on",
        )
        return dict(ChannelOutput(channel).data)
