from rest_framework.routers import SimpleRouter

from memorybot import apis

router = SimpleRouter(trailing_slash=False)
router.register(
    r"bots/(?P<bot_id>[^/]+)/memory/purge", apis.MemoryPurgeViewSet, basename="memory-purge"
)
urlpatterns = router.urls
