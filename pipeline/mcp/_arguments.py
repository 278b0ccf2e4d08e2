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
        props = schema.get("properties", {})
        required = schema.get("required", [])
        return cls(
            tool,
            schema,
            tuple(props),
            frozenset(required),
            jsonschema.Draft202012Validator(schema),
        )

    def problems(self, arguments: Mapping[str, Any]) -> list[str]:
        """What in *arguments* the schema refuses (empty if nothing): each
        names the argument, the path in it and the rule, not the value."""
        out: list[str] = []
        for error in self._validator.iter_errors(dict(arguments)):
            out.extend(_explain(error))
            if len(out) >= MAX_PROBLEMS:
                break
        return sorted(set(out))[:MAX_PROBLEMS]


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
