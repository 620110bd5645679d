from rest_framework.routers import SimpleRouter

from memory import apis

router = SimpleRouter(trailing_slash=False)
router.register(r"bots/(?P<bot_id>[^/]+)/memory", apis.MemoryViewSet, basename="memory")
urlpatterns = router.urls
