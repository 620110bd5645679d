from django.urls import path
from rest_framework.routers import SimpleRouter

from conversations import apis

router = SimpleRouter(trailing_slash=False)
router.register("chats", apis.ChatViewSet, basename="chat")
urlpatterns = [path("me/export", apis.MyExportApi.as_view(), name="my-export"), *router.urls]
