"""An MCP tool's schema, checked when listed; arguments checked against
it, never echoed; results as text.  No server: the fast tier's share."""

from __future__ import annotations

import json

from typing import Any

import mcp_types as types
import pytest

from hypothesis import given
from hypothesis import strategies as st

from pipeline.errors import MalformedToolSchema
from pipeline.mcp._arguments import ArgumentSchema
from pipeline.mcp._results import result_text


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "n": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string"}},
        "mode": {"enum": ["fast", "slow"]},
    },
    "required": ["n"],
}
CHECKED = ArgumentSchema.of("srv", "count", SCHEMA)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ([], "the input schema is not a JSON object"),
        ({"type": "array"}, "the input schema's type is not 'object'"),
        (
            {"type": "object", "properties": {"x": {"type": 7}}},
            "not a JSON schema at properties/x/type",
        ),
        (
            {"type": "object", "required": "x"},
            "not a JSON schema at required",
        ),
        # A $ref to a missing definition, or out of the schema (never
        # fetched): found when listed, not at the first call (which
        # failed with the tool's "_WrappedReferencingError").
        (
            {"type": "object", "properties": {"x": {"$ref": "#/$defs/no"}}},
            r"the input schema's \$ref at properties/x does not resolve",
        ),
        (
            {
                "type": "object",
                "properties": {
                    "x": {"items": {"$ref": "http://127.0.0.1:9/s.json"}}
                },
            },
            r"\$ref at properties/x/items does not resolve",
        ),
    ],
)
def test_malformed_schemas(schema: object, expected: str) -> None:
    with pytest.raises(MalformedToolSchema, match=expected) as caught:
        ArgumentSchema.of("srv", "t", schema)
    assert str(caught.value).startswith("MCP server 'srv': tool 't'")


@pytest.mark.parametrize(
    ("extra", "open_"),
    [
        ({}, False),  # undeclared: as strict as a Python tool
        ({"additionalProperties": False}, False),
        ({"additionalProperties": True}, True),
        ({"additionalProperties": {"type": "string"}}, True),
        ({"patternProperties": {"^x_": {}}}, True),
    ],
)
def test_schemas_open_to_unlisted_arguments(
    extra: dict[str, Any], open_: bool
) -> None:
    checked = ArgumentSchema.of("srv", "t", {**SCHEMA, **extra})
    assert checked.open is open_


def test_references_that_resolve() -> None:
    """Local references (to $defs, to the root) are followed."""
    schema = {
        "type": "object",
        "$defs": {"n": {"type": "integer"}},
        "properties": {"a": {"$ref": "#/$defs/n"}, "b": {"$ref": "#"}},
    }
    checked = ArgumentSchema.of("srv", "t", schema)
    assert checked.problems({"a": "secret-value", "b": {"a": 1}}) == [
        "argument 'a': type must be 'integer'"
    ]
    # Under a nested $id (a new base) a reference is left to the call,
    # where one that does not resolve is named, not raised.
    nested = ArgumentSchema.of(
        "srv",
        "t",
        {
            "type": "object",
            "properties": {"a": {"$id": "urn:x", "$ref": "#/$defs/no"}},
        },
    )
    assert nested.problems({"a": "secret-value"}) == [
        "the input schema of 't' has a $ref that does not resolve"
    ]


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "a.b"])
def test_names_a_model_refuses(name: str) -> None:
    with pytest.raises(MalformedToolSchema, match="1-64 letters"):
        ArgumentSchema.of("srv", name, SCHEMA)


def test_problems_name_the_argument_and_the_rule() -> None:
    assert CHECKED.problems({"n": 3, "tags": ["a"], "mode": "fast"}) == []
    assert CHECKED.problems({}) == ["missing required argument 'n'"]
    assert CHECKED.problems({"n": -1}) == ["argument 'n': minimum must be 0"]
    assert CHECKED.problems({"n": 1, "tags": ["a", 2]}) == [
        "argument 'tags' at 1: type must be 'string'"
    ]
    assert CHECKED.problems({"n": 1, "mode": "medium"}) == [
        "argument 'mode': enum must be ['fast', 'slow']"
    ]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(min_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(n=JSON, tags=JSON, mode=st.text(min_size=8))
def test_values_are_never_echoed(n: object, tags: object, mode: str) -> None:
    problems = "; ".join(
        CHECKED.problems({"n": n, "tags": tags, "mode": mode})
    )
    for value in (n, tags, mode):
        if isinstance(value, str) or (
            isinstance(value, int)
            and not isinstance(value, bool)
            and abs(value) > 9
        ):
            assert str(value) not in problems
    assert json.dumps(mode) not in problems


def test_results_as_text() -> None:
    text = types.TextContent(type="text", text="hello")
    image = types.ImageContent(
        type="image", data="AAAA", mime_type="image/png"
    )
    link = types.ResourceLink(
        type="resource_link", uri="file:///a.txt", name="a"
    )
    assert result_text(types.CallToolResult(content=[text, image, link])) == (
        "hello\n[image: image/png, 3 bytes]\n[resource: file:///a.txt]"
    )
    structured = types.CallToolResult(
        content=[text], structured_content={"b": 1, "a": [2]}
    )
    assert result_text(structured) == '{"a":[2],"b":1}'
    failed = types.CallToolResult(
        content=[text], structured_content={"x": 1}, is_error=True
    )
    assert result_text(failed) == "hello"
