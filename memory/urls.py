from django.urls import path

from memory import apis

urlpatterns = [
    path("bots/<str:bot_id>/memory", apis.MemoryApi.as_view()),
    path("bots/<str:bot_id>/memory/log", apis.MemoryLogApi.as_view()),
    path("bots/<str:bot_id>/memory/bot", apis.MemoryBotApi.as_view()),
]
