"""Change an organization's memory settings: prints the settings."""

from typing import Any

from django.core.management.base import CommandParser

from openbot.apis import OrganizationSettingsOutput
from openbot.command_output import JsonCommand, lookup
from openbot.models import Organization
from openbot.services import organization_settings_update


class Command(JsonCommand):
    help = "Set botMemory (on/off) and botMemoryModel (a model or none)."
    options_of_fields = {"botMemoryModel": "--bot-memory-model"}

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", required=True)
        parser.add_argument("--bot-memory", choices=["on", "off"])
        parser.add_argument("--bot-memory-model", help='"<provider>:<model>" or none')

    def run(self, **options: Any) -> dict[str, Any]:
        organization = lookup(Organization, options["org"], "--org")
        model = options["bot_memory_model"]
        flag = options["bot_memory"]
        organization = organization_settings_update(
            organization=organization,
            bot_memory=None if flag is None else flag == "on",
            bot_memory_model=None if model in (None, "none") else model,
            clear_model=model == "none",
        )
        return dict(OrganizationSettingsOutput(organization).data)
