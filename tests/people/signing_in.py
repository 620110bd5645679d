"""Signing a test's browser-less client in to `/me/` the way a person does: a link made by
the real service, opened, its button pressed."""

import re

from django.test import Client

from openbot.models import Organization, Person
from people.services import sign_in_link_create

ENTRY_ID = re.compile(r'id="entry-([^"]+)"')


def signed_in(person: Person, organization: Organization) -> Client:
    client = Client()
    link = sign_in_link_create(person=person, organization=organization)
    response = client.post(link)
    assert response.status_code == 302, response.content
    assert response["Location"] == "/me/"
    return client


def listed_ids(html: bytes) -> list[str]:
    """The ids of the entries a bot's page lists, in its order."""
    return ENTRY_ID.findall(html.decode())
