"""The URL root: `/v1/…` JSON routes, the OpenAPI schema [A8] and the read-only admin."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.permissions import AllowAny
from rest_framework.routers import SimpleRouter

from openbot.apis import OrganizationViewSet

router = SimpleRouter(trailing_slash=False)
router.register("organizations", OrganizationViewSet, basename="organization")

handler404 = "openbot.errors.not_found_view"
handler500 = "openbot.errors.server_error_view"

urlpatterns = [
    path("admin/", admin.site.urls),
    path(
        "v1/schema",
        SpectacularAPIView.as_view(authentication_classes=[], permission_classes=[AllowAny]),
        name="schema",
    ),
    path("v1/", include(router.urls)),
    path("v1/", include("chats.urls")),
    # Before the memory routes: `memory/purge` would otherwise be read as an entry id [A11].
    path("v1/", include("memorybot.urls")),
    path("v1/", include("memory.urls")),
]
