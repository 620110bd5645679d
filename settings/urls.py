"""The URL root: `/v1/…` JSON routes, the OpenAPI schema, the read-only admin, the page
for people (`/me/`) and the health endpoints."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.renderers import OpenApiJsonRenderer2, OpenApiYamlRenderer
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularSwaggerView,
)
from rest_framework.permissions import AllowAny
from rest_framework.routers import SimpleRouter

from openbot.apis import LivenessApi, MySettingsApi, OrganizationViewSet, ReadinessApi

router = SimpleRouter(trailing_slash=False)
router.register("organizations", OrganizationViewSet, basename="organization")

handler404 = "openbot.errors.not_found_view"
handler500 = "openbot.errors.server_error_view"

urlpatterns = [
    path("healthz", LivenessApi.as_view(), name="healthz"),
    path("readyz", ReadinessApi.as_view(), name="readyz"),
    path("admin/", admin.site.urls),
    path("me/", include("people.urls")),
    path(
        "v1/schema",
        # `?format=json` is `application/json`, which a browser shows rather than downloads.
        SpectacularAPIView.as_view(
            authentication_classes=[],
            permission_classes=[AllowAny],
            renderer_classes=[OpenApiYamlRenderer, OpenApiJsonRenderer2],
        ),
        name="schema",
    ),
    # The docs, with assets bundled (drf-spectacular-sidecar), served from /static/.
    path(
        "v1/docs",
        SpectacularSwaggerView.as_view(
            url_name="schema", authentication_classes=[], permission_classes=[AllowAny]
        ),
        name="docs",
    ),
    path("v1/me/settings", MySettingsApi.as_view(), name="my-settings"),
    path("v1/", include(router.urls)),
    path("v1/", include("conversations.urls")),
    # Before the memory routes: `memory/purge` would otherwise be read as an entry id.
    path("v1/", include("memorybot.urls")),
    path("v1/", include("memory.urls")),
]
