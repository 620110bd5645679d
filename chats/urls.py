from django.urls import path

from chats import apis

urlpatterns = [
    path("chats", apis.ChatCreateApi.as_view()),
    path("chats/<str:chat_id>", apis.ChatDetailApi.as_view()),
    path("chats/<str:chat_id>/items", apis.ChatItemsApi.as_view()),
]
