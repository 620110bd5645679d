from tests.conftest import World


def test_org_settings_round_trip(world: World) -> None:
    client = world.alice.client()
    url = f"/v1/organizations/{world.org.id}/settings"
    assert client.get(url).json() == {"botMemory": True, "botMemoryModel": None}
    response = client.patch(url, {"botMemoryModel": "offline:extractive"}, format="json")
    assert response.status_code == 200
    assert response.json() == {"botMemory": True, "botMemoryModel": "offline:extractive"}


def test_chat_create_and_items(world: World) -> None:
    client = world.alice.client()
    response = client.post("/v1/chats", {"bot": world.bot.id}, format="json")
    assert response.status_code == 201, response.json()
    chat_id = response.json()["id"]
    assert client.get(f"/v1/chats/{chat_id}/items").json() == {"items": []}
    assert world.dave.client().get(f"/v1/chats/{chat_id}").status_code == 404
