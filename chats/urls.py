from django.urls import path

from chats import apis

urlpatterns = [
    path("chats", apis.ChatCreateApi.as_view()),
    path("chats/<str:chat_id>", apis.ChatDetailApi.as_view()),
    path("chats/<str:chat_id>/items", apis.ChatItemsApi.as_view()),
    path("chats/<str:chat_id>/turns", apis.ChatTurnApi.as_view()),
    path("chats/<str:chat_id>/confessions", apis.ChatConfessionsApi.as_view()),
    path("chats/<str:chat_id>/enrichments", apis.ChatEnrichmentsApi.as_view()),
    path("chats/<str:chat_id>/learning", apis.ChatLearningApi.as_view()),
]
