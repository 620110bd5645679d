from django.urls import path

from people import views

app_name = "people"
urlpatterns = [
    path("", views.home, name="home"),
    path("sign-in/<str:signed>", views.sign_in, name="sign-in"),
    path("sign-out", views.sign_out_view, name="sign-out"),
    path("export", views.export, name="export"),
    path("learning", views.learning_setting, name="learning"),
    path("bots/<str:bot_id>/", views.bot_memory, name="bot"),
    path("bots/<str:bot_id>/remember", views.remember, name="remember"),
    path("bots/<str:bot_id>/forget-everything", views.forget_everything, name="forget-everything"),
    path("bots/<str:bot_id>/entries/<str:entry_id>/forget", views.forget, name="forget"),
    path("chats/<str:chat_id>/", views.chat_learning, name="chat"),
]
