from rest_framework.routers import SimpleRouter

from memory import apis, search_apis

router = SimpleRouter(trailing_slash=False)
# Before the memory routes: `memory/search` would otherwise be read as an entry id.
router.register(
    r"bots/(?P<bot_id>[^/]+)/memory/search", search_apis.MemorySearchViewSet, basename="search"
)
router.register(r"bots/(?P<bot_id>[^/]+)/memory", apis.MemoryViewSet, basename="memory")
urlpatterns = router.urls
