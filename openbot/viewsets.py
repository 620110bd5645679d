"""[A9] The base of every `/v1` ViewSet: the caller, and the objects its permission classes
looked up through the caller, so that an action never looks them up a second time."""

from rest_framework import viewsets

from openbot.access import Caller
from openbot.auth import caller_of
from openbot.models import Bot, Organization


class ScopedViewSet(viewsets.ViewSet):
    """A ViewSet whose permission classes leave the route's bot or organization on it."""

    # Lookups accept what Django's `<str:…>` accepted: any id without a slash.
    lookup_value_regex = "[^/]+"
    bot: Bot
    organization: Organization

    @property
    def caller(self) -> Caller:
        return caller_of(self.request)

    def route_bot_id(self) -> str:
        """The id of the bot the route is about: `bot_id` in the URL."""
        return str(self.kwargs["bot_id"])
