"""An MCP tool's input schema: checked when listed, arguments checked
against it before each call.

A schema is checked once, when the server lists it: it must be a JSON
schema (draft 2020-12) of an object whose properties are schemas.  An
argument that does not fit is an error naming the argument, the path into
it and the schema's rule (``type``, ``minimum``, ...), never the value.
"""

from __future__ import annotations

import re

from collections.abc import Iterator, Mapping
from typing import Any, final

import attrs
import jsonschema
import jsonschema.exceptions
import referencing
import referencing.exceptions
import referencing.jsonschema

from .._decode import MAX_PROBLEMS
from ..errors import MalformedToolSchema


__all__ = ("ArgumentSchema",)

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SHOWN_RULES = frozenset(
    {
        "type",
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "multipleOf",
        "pattern",
    }
)


@final
@attrs.frozen
class ArgumentSchema:
    """One tool's input schema, checked; :meth:`problems` checks a call."""

    tool: str
    schema: Mapping[str, Any]
    properties: tuple[str, ...]
    required: frozenset[str]
    _validator: Any = attrs.field(alias="validator", eq=False)
    open: bool = False
    """Whether the schema takes arguments its properties do not list
    (it declares ``patternProperties`` or an ``additionalProperties``
    other than ``false``); an undeclared ``additionalProperties`` is
    taken as ``false``, as strict as a Python tool."""

    @classmethod
    def of(cls, server: str, tool: str, schema: object) -> ArgumentSchema:
        """*schema* as listed by *server* for *tool*; a malformed one is a
        :class:`~pipeline.errors.MalformedToolSchema` naming both."""
        where = f"MCP server {server!r}: tool {tool!r}"
        if not _NAME.fullmatch(tool):
            msg = (
                f"MCP server {server!r} lists a tool whose name is not 1-64 "
                "letters, digits, '_' or '-' (models accept no other)"
            )
            raise MalformedToolSchema(msg)
        if not isinstance(schema, Mapping):
            msg = f"{where}: the input schema is not a JSON object"
            raise MalformedToolSchema(msg)
        if schema.get("type") != "object":
            msg = f"{where}: the input schema's type is not 'object'"
            raise MalformedToolSchema(msg)
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.exceptions.SchemaError as exc:
            at = "/".join(str(p) for p in exc.absolute_path) or "(top)"
            msg = (
                f"{where}: the input schema is not a JSON schema at {at} "
                f"(rule {exc.validator!r})"
            )
            raise MalformedToolSchema(msg) from None
        _check_refs(where, schema)
        props = schema.get("properties", {})
        required = schema.get("required", [])
        return cls(
            tool,
            schema,
            tuple(props),
            frozenset(required),
            jsonschema.Draft202012Validator(schema),
            "patternProperties" in schema
            or schema.get("additionalProperties", False) is not False,
        )

    def problems(self, arguments: Mapping[str, Any]) -> list[str]:
        """What in *arguments* the schema refuses (empty if nothing): each
        names the argument, the path in it and the rule, not the value."""
        out: list[str] = []
        try:
            for error in self._validator.iter_errors(dict(arguments)):
                out.extend(_explain(error))
                if len(out) >= MAX_PROBLEMS:
                    break
        except referencing.exceptions.Unresolvable:
            # A reference the listing could not follow (under a nested
            # "$id", say): the schema's fault, not the arguments'.
            return [
                f"the input schema of {self.tool!r} has a $ref that does not resolve"
            ]
        return sorted(set(out))[:MAX_PROBLEMS]


def _check_refs(where: str, schema: Mapping[str, Any]) -> None:
    """Every ``$ref`` in *schema* resolves within it: none points at a
    missing definition or outside the schema (no schema is ever fetched).
    A ``$ref`` under a nested ``$id`` (a new base) is left to the call."""
    resolver = referencing.Registry().resolver_with_root(
        referencing.jsonschema.DRAFT202012.create_resource(schema)
    )
    for at, ref in _refs(schema, ()):
        try:
            resolver.lookup(ref)
        except referencing.exceptions.Unresolvable:
            msg = (
                f"{where}: the input schema's $ref at "
                f"{'/'.join(at) or '(top)'} does not resolve within it"
            )
            raise MalformedToolSchema(msg) from None


def _refs(
    node: object, at: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], str]]:
    """``(path, ref)`` for each ``$ref`` in *node*, not under a nested
    ``$id``."""
    if isinstance(node, Mapping):
        if at and "$id" in node:
            return
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield at, ref
        for key, value in node.items():
            if key not in {"const", "enum", "default", "examples"}:
                yield from _refs(value, (*at, str(key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _refs(value, (*at, str(i)))


def _explain(
    error: jsonschema.exceptions.ValidationError,
) -> Iterator[str]:
    path = [str(p) for p in error.absolute_path]
    rule = str(error.validator)
    if not path:
        if rule == "required" and isinstance(error.instance, dict):
            wanted: Any = error.validator_value
            for name in wanted:
                if name not in error.instance:
                    yield f"missing required argument {name!r}"
            return
        if rule == "additionalProperties":
            yield "arguments the schema does not list"
            return
        yield f"the arguments fail the schema's {rule!r} rule"
        return
    head, rest = path[0], path[1:]
    name = repr(head) if _NAME.fullmatch(head) else "(an unlisted name)"
    at = "" if not rest else " at " + "/".join(rest)
    if rule in _SHOWN_RULES:
        # The schema's own value (the server's, not the caller's).
        yield f"argument {name}{at}: {rule} must be {error.validator_value!r}"
    else:
        yield f"argument {name}{at}: fails the schema's {rule!r} rule"
