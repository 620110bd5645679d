from rest_framework.routers import SimpleRouter

from chats import apis

router = SimpleRouter(trailing_slash=False)
router.register("chats", apis.ChatViewSet, basename="chat")
urlpatterns = router.urls
