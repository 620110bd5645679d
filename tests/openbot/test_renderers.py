"""[Q4] The API's JSON is encoded by orjson, and is the body DRF's own renderer writes."""

import datetime
import decimal
import json
from typing import Any

import pytest
from django.utils.translation import gettext_lazy
from hypothesis import given
from hypothesis import strategies as st
from rest_framework import renderers
from rest_framework.exceptions import ErrorDetail

from openbot.renderers import JSONRenderer, json_bytes
from tests.conftest import World

DRF = renderers.JSONRenderer()
OURS = JSONRenderer()

# JSON values without floats: both encoders must write the same bytes for them.
SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text()
VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(VALUES)
def test_it_writes_what_drf_writes(data: Any) -> None:
    assert OURS.render(data) == DRF.render(data)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_read_back_the_same(number: float) -> None:
    # Python writes 1e+16 where orjson writes 1e16: the same number.
    assert json.loads(OURS.render({"confidence": number})) == {"confidence": number}


@pytest.mark.parametrize(
    "data",
    [
        {"text": "line\u2028separator\u2029paragraph"},
        {"content": "Grüße, 東京, 🙂"},
        {"error": {"code": "invalid", "message": ErrorDetail("must be 1 to 10", code="max")}},
        {"message": gettext_lazy("not found")},
        {"at": datetime.datetime(2026, 12, 1, 20, 0, 0, 123456, tzinfo=datetime.UTC)},
        {"day": datetime.date(2026, 12, 1), "cost": decimal.Decimal("1.50")},
        {1: "an integer key", "nested": [{2: None}]},
        {"big": 2**70},
        [],
        {},
    ],
)
def test_what_orjson_leaves_to_drf_comes_out_as_before(data: Any) -> None:
    assert OURS.render(data) == DRF.render(data)


def test_an_indent_asked_for_is_drfs() -> None:
    body = OURS.render({"entries": [1, 2]}, "application/json; indent=4")
    assert body == DRF.render({"entries": [1, 2]}, "application/json; indent=4")
    assert b"\n    " in body


def test_no_body_is_empty() -> None:
    assert OURS.render(None) == b""


def test_json_bytes_is_the_renderers_body() -> None:
    data = {"entries": [{"id": "mem_1", "content": "a\u2028b"}], "version": 3}
    assert json_bytes(data) == DRF.render(data)


def test_routes_answer_with_it(world: World) -> None:
    response = world.alice.client().get(f"/v1/bots/{world.bot.id}/memory")
    assert response.status_code == 200
    assert isinstance(response.accepted_renderer, JSONRenderer)
    assert response["Content-Type"] == "application/json"
