from django.apps import AppConfig


class PeopleConfig(AppConfig):
    """The top floor's page for people: `/me/`, where a person signed in by a one-time link
    sees and manages what bots remember about them, through the same services as the API."""

    name = "people"
