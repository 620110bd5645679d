from django.urls import path

from memorybot import apis

urlpatterns = [
    path("bots/<str:bot_id>/memory/purge", apis.MemoryPurgeApi.as_view()),
]
