"""[A9] Permission classes of the `/v1` routes.

Each looks its object up *through* the caller with the access helpers of `openbot.access`, so
the semantics are theirs: another organization's object, or one without a grant, is a 404
(raised here), a right the caller lacks on an object they see is a 403. The object is left on
the view (`ScopedViewSet`). Declare them after `IsAuthenticated`: no token is a 401 first.
"""

from typing import Any, TypeVar

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from openbot.access import bot_for_memory_admin, bot_for_reader, organization_for_admin
from openbot.viewsets import ScopedViewSet

Scoped = TypeVar("Scoped", bound=ScopedViewSet)


def scoped(view: Any, kind: type[Scoped]) -> Scoped:
    """`view` as the kind of ViewSet a permission class leaves its lookups on."""
    if not isinstance(view, kind):
        raise TypeError(f"{type(view).__name__} must be a {kind.__name__}")
    return view


class CanReadBot(BasePermission):
    """Read on the route's bot; an unseen bot is a 404."""

    def has_permission(self, request: Request, view: Any) -> bool:
        view = scoped(view, ScopedViewSet)
        view.bot = bot_for_reader(caller=view.caller, bot_id=view.route_bot_id())
        return True


class CanWriteBot(BasePermission):
    """Write on the route's bot, which is not linked; read only is a 403."""

    def has_permission(self, request: Request, view: Any) -> bool:
        view = scoped(view, ScopedViewSet)
        view.bot = bot_for_memory_admin(caller=view.caller, bot_id=view.route_bot_id())
        return True


class IsOrganizationAdmin(BasePermission):
    """An admin of the route's organization, the caller's own; another one is a 404."""

    def has_permission(self, request: Request, view: Any) -> bool:
        view = scoped(view, ScopedViewSet)
        view.organization = organization_for_admin(
            caller=view.caller, organization_id=str(view.kwargs["org_id"])
        )
        return True
