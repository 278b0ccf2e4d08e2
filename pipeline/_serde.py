"""Type-directed serialisation: cattrs hooks and canonical JSON bytes.

Decoding only ever builds the types the caller declares (cattrs
``structure`` into them): no class names are read from the payload, nothing
is imported or executed, and there is no pickle anywhere.
"""

from __future__ import annotations

import base64
import binascii
import contextvars
import enum
import hashlib
import json
import math
import types
import typing
import weakref

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, Literal, get_args, get_origin

import attrs
import cattrs
import orjson

from cattrs.cols import is_any_set, is_sequence, list_structure_factory
from cattrs.errors import IterableValidationError, IterableValidationNote
from cattrs.preconf.json import make_converter as _json_converter
from pyrsistent import PMap, PVector, pmap, pvector

from ._context import Context, freeze
from ._depth import RECORD_DEPTH, loads
from ._message_structure import (
    register_message_hooks,
    same_message,
    same_usage,
)
from ._messages import (
    FilePart,
    ImagePart,
    Message,
    Part,
    Role,
    TextPart,
    ToolCall,
    Usage,
)
from ._unions import is_kind_union, kind_union_structure
from .secrets import (
    BY_VALUE,
    MARKER,
    Secret,
    is_secret_type,
    resolve,
    stored,
)


__all__ = (
    "STRUCTURE_ERRORS",
    "canonical",
    "canonical_exact",
    "checksum",
    "holds_keyed",
    "keyed_not_by_str",
    "make_converter",
    "safe_call",
    "unicode_safe",
)

STRUCTURE_ERRORS: tuple[type[Exception], ...] = (
    cattrs.BaseValidationError,
    ValueError,
    TypeError,
    KeyError,
    AttributeError,  # cattrs' answer to, say, a list where a class belongs
    RecursionError,
    OverflowError,  # an integer too large for a float
)
"""What structuring untrusted data can raise; callers turn it into values."""


def unicode_safe(text: str, *, escape: bool = False) -> str:
    """*text* with lone surrogates replaced by ``?``, so any encoder can
    write it (JSON escapes such as ``"\\ud800"`` decode to them, and a
    request body holding one cannot be sent).  With *escape*, they become
    JSON escapes instead (for JSON text: a tool call's arguments keep
    saying what the model sent, and the tool refuses them).  *text* itself
    when it is already valid Unicode, which is the common case."""
    if text.isascii():
        return text
    try:
        text.encode()
    except UnicodeEncodeError:
        errors = "backslashreplace" if escape else "replace"
        return text.encode("utf-8", errors).decode()
    return text


def safe_call(id_: str, name: str, arguments: str) -> ToolCall:
    """A model's tool call that any encoder can write: lone surrogates in
    its id, name and arguments become JSON escapes (see
    :func:`unicode_safe`), so the next request still goes out; a name so
    changed matches no tool, and the call gets an error result."""
    return ToolCall(
        unicode_safe(id_, escape=True),
        unicode_safe(name, escape=True),
        unicode_safe(arguments, escape=True),
    )


def canonical_exact(value: object) -> tuple[bytes, bool]:
    """:func:`canonical`, and whether reading the bytes back gives *value*
    exactly (orjson wrote them; the fallback may turn integer keys into
    strings, say)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS), True
    except TypeError:
        return canonical(value), False


def _orjson_refuses_past(limit: int) -> bool:
    """Whether orjson refuses to write arrays and objects nested past
    *limit* levels (it stops at its own recursion limit): then bytes it
    wrote nest no deeper, and need no count against *limit*.  Probed once,
    not assumed: another orjson may write deeper."""
    for wrap in (lambda v: [v], lambda v: {"a": v}):
        value: object = []
        for _ in range(limit):
            value = wrap(value)  # limit + 1 levels
        try:
            orjson.dumps(value)
        except TypeError:  # orjson.JSONEncodeError: "Recursion limit"
            continue
        return False
    return True


ORJSON_WITHIN_RECORD_DEPTH: Final = _orjson_refuses_past(RECORD_DEPTH)
"""Whether what :func:`canonical_exact` writes exactly (orjson) nests no
deeper than a checkpoint record may (:data:`RECORD_DEPTH`)."""


def canonical(value: object) -> bytes:
    """Canonical JSON bytes: sorted keys, no spaces, UTF-8, no NaN.

    orjson writes them (ten times faster than the standard library, the
    same bytes); what it refuses (integers past 64 bits, non-string keys)
    goes through :func:`json.dumps`, which writes or refuses it as before.
    orjson would write NaN as ``null``: the converter's unstructure hooks
    refuse non-finite floats before a value gets here.
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError included
        return json.dumps(
            value,
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        ).encode()


def _finite(value: float) -> float:
    if not math.isfinite(value):
        msg = f"{value} is not a JSON number (non-finite floats cannot be stored)"
        raise ValueError(msg)
    return value


def checksum(data: bytes) -> str:
    """SHA-256 of *data*, hex."""
    return hashlib.sha256(data).hexdigest()


def _strict(kind: type, *accept: type) -> Callable[[Any, Any], Any]:
    allowed = accept or (kind,)

    def structure(value: Any, target: Any) -> Any:
        if target is not kind and _is_enum(target):
            # A StrEnum or IntEnum (or str-mixin enum) field: its member,
            # or a refusal (registered for str, this hook sees them first).
            return _enum_structure(target)(value, target)
        # bool is an int subclass: never accept it where a number is meant.
        if type(value) is bool and kind is not bool:
            msg = f"expected {kind.__name__}, got bool"
            raise TypeError(msg)
        if not isinstance(value, allowed):
            msg = f"expected {kind.__name__}, got {type(value).__name__}"
            raise TypeError(msg)
        if kind is float:
            return _in_range(typing.cast("float", value))
        return kind(value)

    return structure


def _in_range(value: float) -> float:
    """*value* as a finite float: an integer past the float range (JSON
    allows any number of digits) and infinity (``1e400`` reads as one)
    are refused, without quoting them."""
    try:
        out = float(value)
    except OverflowError:
        msg = "expected a number in the float range"
        raise ValueError(msg) from None
    if not math.isfinite(out):
        msg = "expected a finite number"
        raise ValueError(msg)
    return out


def _is_enum(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, enum.Enum)


def _enum_structure(t: Any) -> Callable[[Any, Any], Any]:
    def structure(value: Any, _: Any) -> Any:
        if type(value) is bool:  # True is not the member whose value is 1
            msg = f"expected {t.__name__}, got bool"
            raise TypeError(msg)
        if isinstance(value, t):  # a member already (a StrEnum is a str)
            return value
        try:
            member = t(value)
        except ValueError:
            member = None
        # 1.0 == 1 finds the member whose value is 1: the kinds must match.
        if member is None or type(member.value) is not type(value):
            msg = f"expected one of {t.__name__}'s values"
            raise ValueError(msg) from None
        return member

    return structure


def _is_literal(t: Any) -> bool:
    return get_origin(t) is Literal


def _literal_structure(t: Any) -> Callable[[Any, Any], Any]:
    """A ``Literal``'s own values only: ``True`` is not ``1``, nor ``1.0``
    (``in`` says they are); an enum member stands for its value."""
    allowed = tuple(
        (a.value if isinstance(a, enum.Enum) else a, a) for a in get_args(t)
    )

    def structure(value: Any, _: Any) -> Any:
        for plain, given in allowed:
            if type(plain) is type(value) and plain == value:
                return given
        msg = "expected one of the literal's values"
        raise ValueError(msg)

    return structure


def _is_array(t: Any) -> bool:
    """A homogeneous sequence or set type (a JSON array)."""
    return (is_sequence(t) or is_any_set(t)) and not _is_pvector(t)


def _is_tuple_of(t: Any) -> bool:
    """A tuple of fixed length and kinds, ``tuple[int, str]``."""
    args = get_args(t)
    return get_origin(t) is tuple and bool(args) and args[-1] is not Ellipsis


_ARRAYS = (list, tuple)
_SETS = (list, tuple, set, frozenset)


def _array_structure(
    conv: cattrs.Converter, t: Any
) -> Callable[[Any, Any], Any]:
    """Only an array is an array: cattrs would take any iterable (a
    string's characters, an object's keys), so a value of the wrong kind
    fails once, not once per character."""
    args = get_args(t)
    item = args[0] if args else Any
    items = list_structure_factory(list[item], conv)  # type: ignore[valid-type]
    origin = get_origin(t) or t
    is_set = is_any_set(t)
    accept = _SETS if is_set else _ARRAYS
    if is_set:
        make: Callable[[list[Any]], Any] = (
            frozenset if origin is frozenset else set
        )
    elif origin is tuple:
        make = tuple
    else:
        make = _same

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, accept):
            msg = f"expected an array, got {type(value).__name__}"
            raise TypeError(msg)
        return make(items(value, list))

    return structure


def _same(value: list[Any]) -> list[Any]:
    return value


def _tuple_structure(
    conv: cattrs.Converter, t: Any
) -> Callable[[Any, Any], Any]:
    base = conv.gen_structure_hetero_tuple(t)

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, _ARRAYS):
            msg = f"expected an array, got {type(value).__name__}"
            raise TypeError(msg)
        return base(value, t)

    return structure


def _enum_unstructure(value: enum.Enum) -> Any:
    return value.value


def keyed_not_by_str(t: Any) -> bool:
    """A mapping type whose keys are not strings (JSON keys are)."""
    origin = get_origin(t)
    if origin not in (dict, Mapping, typing.Mapping):
        return False
    args = get_args(t)
    return len(args) == 2 and args[0] is not str and args[0] is not Any


def holds_keyed(t: Any) -> bool:
    """*t* is, or holds in its arguments (a union's member, a list's item,
    a mapping's value, at any depth), a mapping keyed by something else
    than strings: a value of it must be written by this type's hooks, as
    its own class's (``dict``, ``list``) would keep the keys as they are.
    An attrs class's fields are not looked into: its hook writes each by
    its declared type."""
    stack = [t]
    while stack:
        t = stack.pop()
        if keyed_not_by_str(t):
            return True
        origin = get_origin(t)
        if origin is Literal:
            continue
        args = get_args(t)
        stack.extend(args[:1] if origin is typing.Annotated else args)
    return False


def _is_keyed_union(t: Any) -> bool:
    origin = get_origin(t)
    return (origin is typing.Union or origin is types.UnionType) and any(
        holds_keyed(m) for m in get_args(t)
    )


def _keyed_union_unstructure(
    conv: cattrs.Converter, t: Any
) -> Callable[[Any], Any]:
    """A value of a union holding a non-str-keyed mapping
    (``dict[Color, int] | None``, ``list[dict[Color, int]] | int``) is
    written by the member its class is, as that member: cattrs would
    write it by its own class (``dict``), keys as they are."""
    members = [(m, _class_of(m)) for m in get_args(t) if holds_keyed(m)]

    def unstructure(value: Any) -> Any:
        for member, cls in members:
            if cls is not None and isinstance(value, cls):
                return conv.unstructure(value, member)
        return conv.unstructure(value)

    return unstructure


def _class_of(t: Any) -> type | None:
    """The class a value of *t* is an instance of (``dict`` for
    ``dict[Color, int]``), if there is one."""
    while get_origin(t) is typing.Annotated:
        t = get_args(t)[0]
    cls = get_origin(t) or t
    return cls if isinstance(cls, type) else None


def _keyed_structure(
    conv: cattrs.Converter, t: Any
) -> Callable[[Any, Any], Any]:
    """Keys come back from their JSON text (``"7"`` for the int 7)."""
    key_type, value_type = get_args(t)

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            msg = f"expected an object, got {type(value).__name__}"
            raise TypeError(msg)
        out = {}
        for at, (k, v) in enumerate(value.items()):
            try:
                raw = loads(k, "a mapping key") if isinstance(k, str) else k
                key = conv.structure(raw, key_type)
            except STRUCTURE_ERRORS:
                raise _BadKey(at, key_type) from None
            try:
                out[key] = conv.structure(v, value_type)
            except STRUCTURE_ERRORS as exc:
                # Where: a mapping's value (the key is not quoted).
                exc.add_note(
                    IterableValidationNote("a mapping value", "…", value_type)
                )
                msg = "a mapping value does not fit"
                # (cattrs' own signature; pyright reads ExceptionGroup's.)
                raise IterableValidationError(msg, [exc], t) from None  # pyright: ignore[reportCallIssue]
        return out

    return structure


class _BadKey(ValueError):
    """A key of a mapping keyed by something else than strings does not
    fit: named by its position, never quoted (:attr:`explained` is what
    :func:`pipeline._decode.explain` says)."""

    def __init__(self, at: int, key_type: Any) -> None:
        name = getattr(key_type, "__qualname__", None)
        kind = name if isinstance(key_type, type) and name else str(key_type)
        self.explained = (
            f"the key at position {at} is not a {kind}: the keys of this "
            'object are JSON texts (the string a is written "\\"a\\"", '
            'the number 1 "1")'
        )
        super().__init__(self.explained)


def _keyed_unstructure(conv: cattrs.Converter, t: Any) -> Callable[[Any], Any]:
    """Keys are written as their JSON text, so that they round-trip."""
    _, value_type = get_args(t)

    def unstructure(value: Mapping[Any, Any]) -> Any:
        return {
            canonical(conv.unstructure(k)).decode(): conv.unstructure(
                v, value_type
            )
            for k, v in value.items()
        }

    return unstructure


def _none(value: Any, _: Any) -> None:
    if value is not None:
        msg = f"expected null, got {type(value).__name__}"
        raise TypeError(msg)


def _is_pvector(t: Any) -> bool:
    return t is PVector or get_origin(t) is PVector


def _is_pmap(t: Any) -> bool:
    return t is PMap or get_origin(t) is PMap


def make_converter() -> cattrs.Converter:
    """A converter for states, messages and contexts, strict on the way in.

    * ``int``, ``float``, ``str`` and ``bool`` accept only their own JSON
      kind (``1.5`` is not an ``int``, ``True`` is not ``1``); a ``float``
      is finite and in range (``1e400`` and a 400-digit integer are not).
    * A ``Literal`` or an enum takes only its own values, of their own
      kind (``true`` and ``1.0`` are not ``Literal[1]``).
    * Lists, tuples and sets take only arrays (a string is not a list of
      characters, nor an object a list of its keys).
    * Extra keys in an attrs class are an error.
    * :class:`pyrsistent.PVector` and ``PMap`` fields round-trip through
      lists and objects; :class:`~pipeline.Context` has its own hooks.

    .. versionadded:: 0.1.0
    """
    conv = _json_converter(forbid_extra_keys=True)
    conv.register_structure_hook(int, _strict(int))
    conv.register_structure_hook(float, _strict(float, int, float))
    conv.register_structure_hook(str, _strict(str))
    conv.register_structure_hook(bool, _strict(bool))
    conv.register_structure_hook_factory(_is_enum, _enum_structure)
    conv.register_structure_hook_factory(_is_literal, _literal_structure)
    conv.register_structure_hook_factory(
        _is_array, lambda t: _array_structure(conv, t)
    )
    conv.register_structure_hook_factory(
        _is_tuple_of, lambda t: _tuple_structure(conv, t)
    )
    conv.register_unstructure_hook_factory(
        _is_enum, lambda _: _enum_unstructure
    )
    conv.register_structure_hook_factory(
        keyed_not_by_str, lambda t: _keyed_structure(conv, t)
    )
    conv.register_unstructure_hook_factory(
        keyed_not_by_str, lambda t: _keyed_unstructure(conv, t)
    )
    conv.register_unstructure_hook_factory(
        _is_keyed_union, lambda t: _keyed_union_unstructure(conv, t)
    )
    conv.register_structure_hook(type(None), _none)
    conv.register_structure_hook_factory(
        is_kind_union, lambda t: kind_union_structure(conv, t)
    )
    conv.register_unstructure_hook(float, _finite)

    def pvector_structure(t: Any) -> Callable[[Any, Any], Any]:
        args = get_args(t)
        item = args[0] if args else Any

        def structure(value: Any, _: Any) -> Any:
            if not isinstance(value, list):
                msg = f"expected a list, got {type(value).__name__}"
                raise TypeError(msg)
            return pvector(conv.structure(v, item) for v in value)

        return structure

    def pvector_unstructure(t: Any) -> Callable[[Any], Any]:
        args = get_args(t)
        item = args[0] if args else Any
        return lambda value: [conv.unstructure(v, item) for v in value]

    def pmap_structure(t: Any) -> Callable[[Any, Any], Any]:
        args = get_args(t)
        key, val = args if len(args) == 2 else (str, Any)

        def structure(value: Any, _: Any) -> Any:
            if not isinstance(value, dict):
                msg = f"expected an object, got {type(value).__name__}"
                raise TypeError(msg)
            return pmap(
                {
                    conv.structure(k, key): conv.structure(v, val)
                    for k, v in value.items()
                }
            )

        return structure

    def pmap_unstructure(t: Any) -> Callable[[Any], Any]:
        args = get_args(t)
        val = args[1] if len(args) == 2 else Any
        return lambda value: {
            k: conv.unstructure(v, val) for k, v in value.items()
        }

    conv.register_structure_hook_factory(_is_pvector, pvector_structure)
    conv.register_unstructure_hook_factory(_is_pvector, pvector_unstructure)
    conv.register_structure_hook_factory(_is_pmap, pmap_structure)
    conv.register_unstructure_hook_factory(
        _is_pmap,
        pmap_unstructure,
    )

    def context_unstructure(ctx: Context) -> dict[str, Any]:
        return {
            "messages": [conv.unstructure(m, Message) for m in ctx.messages],
            "metadata": _thaw(ctx.metadata),
            "run_id": ctx.run_id,
        }

    def context_structure(value: Any, _: Any) -> Context:
        if not isinstance(value, dict):
            msg = f"expected an object, got {type(value).__name__}"
            raise TypeError(msg)
        extra = set(value) - {"messages", "metadata", "run_id"}
        if extra:
            msg = f"extra fields found ({', '.join(sorted(extra))})"
            raise ValueError(msg)
        messages = value.get("messages", [])
        if not isinstance(messages, list):
            msg = "messages: expected a list"
            raise TypeError(msg)
        run_id = conv.structure(value.get("run_id", ""), str)
        metadata = value.get("metadata", {})
        if not isinstance(metadata, dict):
            msg = "metadata: expected an object"
            raise TypeError(msg)
        return Context(
            pvector(conv.structure(m, Message) for m in messages),
            freeze(metadata, "metadata"),  # type: ignore[arg-type]
            run_id,
        )

    def secret_structure(t: Any) -> Callable[[Any, Any], Any]:
        args = get_args(t)
        inner = args[0] if args else Any

        def structure(value: Any, _: Any) -> Secret[Any]:
            if (
                isinstance(value, dict)
                and len(value) == 1
                and isinstance(value.get(MARKER), str)
            ):
                ref = value[MARKER]
                return Secret(conv.structure(resolve(ref), inner), ref=ref)
            # A value given in the clear (a model's tool argument): wrapped
            # at once, so that it travels on as a secret.
            return Secret(conv.structure(value, inner), ref=BY_VALUE)

        return structure

    conv.register_structure_hook_factory(is_secret_type, secret_structure)
    conv.register_unstructure_hook_factory(is_secret_type, lambda _: stored)
    conv.register_unstructure_hook(Context, context_unstructure)
    conv.register_unstructure_hook(Message, _message_unstructure)
    conv.register_unstructure_hook(Usage, _usage_unstructure)
    conv.register_structure_hook_func(_is_part, part_structure)
    conv.register_unstructure_hook_func(_is_part_type, part_unstructure)
    conv.register_structure_hook(Context, context_structure)
    register_message_hooks(conv)  # after the rest: they fall back to them
    return conv


def _message_unstructure(m: Message) -> dict[str, Any]:
    """A message as cattrs would unstructure it, without its generic cost
    (messages are most of what checkpoints hold); *agent* only when set."""
    usage = m.usage
    calls = m.tool_calls
    # Most messages call no tool or one: no comprehension to run for them.
    if not calls:
        written: list[dict[str, str]] = []
    elif len(calls) == 1:
        c = calls[0]
        written = [{"id": c.id, "name": c.name, "arguments": c.arguments}]
    else:
        written = [
            {"id": c.id, "name": c.name, "arguments": c.arguments}
            for c in calls
        ]
    out = {
        "role": m.role,
        "content": m.content,
        "name": m.name,
        "tool_calls": written,
        "tool_call_id": m.tool_call_id,
        "usage": None
        if usage is None
        else {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
        },
    }
    if m.agent is not None:
        out["agent"] = m.agent
    if m.parts:
        out["parts"] = [part_unstructure(p) for p in m.parts]
    return out


def _usage_unstructure(u: Usage) -> dict[str, Any]:
    """Usage as cattrs' generated hook writes it (its two counts, as they
    are), without that hook's cost; and known to write no part."""
    return {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens}


def proven_message(m: Any) -> dict[str, Any] | None:
    """What :func:`_message_unstructure` writes for *m*, if a reader of a
    ``Message`` field reads it back as a message equal to *m*, with the
    same types all the way down; else ``None`` (the general way writes and
    checks it).

    Known from *m*'s types alone, tested while writing (one pass): *m*
    exactly a :class:`Message` of no parts, its role a :class:`Role`, its
    texts exactly ``str`` (or ``None`` where optional), its calls a tuple
    of exact :class:`ToolCall` of exact ``str`` fields, its usage ``None``
    or exact ``int`` counts.  Such a document holds only those ``str``,
    ``int`` and ``None`` values, each read back as itself by the plain
    hooks of :mod:`pipeline._message_structure` (which build the message
    directly), so the decode-and-compare of the check has nothing left to
    find.  Valid only inside a record that orjson writes exactly (a text
    it cannot write, an integer past 64 bits, are refused there: the check
    then reads back what the standard library wrote).  A property test
    compares it with the general check.
    """
    if type(m) is not Message:
        return None
    # Typed object: what a field holds at run time is what is tested.
    role: object = m.role
    content: object = m.content
    name: object = m.name
    calls: object = m.tool_calls
    call_id: object = m.tool_call_id
    usage: object = m.usage
    agent: object = m.agent
    parts: object = m.parts
    if not (
        type(role) is Role
        and type(content) is str
        and (name is None or type(name) is str)
        and (call_id is None or type(call_id) is str)
        and (agent is None or type(agent) is str)
        and type(parts) is tuple
        and not parts
        and type(calls) is tuple
    ):
        return None
    written: list[dict[str, str]] = []
    for c in calls:
        if type(c) is not ToolCall:
            return None
        id_: object = c.id
        tool: object = c.name
        arguments: object = c.arguments
        if not (
            type(id_) is str and type(tool) is str and type(arguments) is str
        ):
            return None
        written.append({"id": id_, "name": tool, "arguments": arguments})
    if usage is None:
        counts = None
    else:
        counts = proven_usage(usage)
        if counts is None:
            return None
    out = {
        "role": role,
        "content": content,
        "name": name,
        "tool_calls": written,
        "tool_call_id": call_id,
        "usage": counts,
    }
    if agent is not None:
        out["agent"] = agent
    return out


def proven_usage(u: Any) -> dict[str, Any] | None:
    """:func:`proven_message` for usage: what :func:`_usage_unstructure`
    writes, if its counts are exactly ``int`` (not ``bool``)."""
    if type(u) is not Usage:
        return None
    i: object = u.input_tokens
    n: object = u.output_tokens
    if type(i) is int and type(n) is int:
        return {"input_tokens": i, "output_tokens": n}
    return None


Proof = tuple[Callable[[Any], Any], Callable[[Any], dict[str, Any] | None]]

PROOFS: Final[Mapping[object, Proof]] = {
    same_message: (_message_unstructure, proven_message),
    same_usage: (_usage_unstructure, proven_usage),
}
"""For a field read back by one of our hooks (its in-place comparison, see
:func:`pipeline._message_structure.same_for`): the unstructure hook that
must be the one writing its value, and the fused writer and proof that
replaces writing then checking (see :func:`proven_message`)."""


def _has_no_parts(m: object) -> bool:
    return type(m) is Message and not m.parts


NO_PART_UNLESS: Final[Mapping[object, Callable[[Any], bool] | None]] = {
    _message_unstructure: _has_no_parts,
    _usage_unstructure: None,
}
"""For an unstructure hook of ours, whether a value it writes reaches no
part (so no :data:`SINK` is read): a message's when it has no parts
(the test), usage's never (``None``).  A hook not here may reach one (a
part's own hook, a user's hook, a container's hook that dispatches on
what it holds).  A plain dict: read once or more per record."""


def _is_part(t: Any) -> bool:
    return t == Part or t in (TextPart, ImagePart, FilePart)


def _is_part_type(t: Any) -> bool:
    return t in (TextPart, ImagePart, FilePart)


BLOB_MIN = 1024
"""Parts holding at least this many bytes are written to checkpoints once
each, by content (see :class:`BlobSink`); smaller ones inline."""


class BlobSink:
    """Where a checkpoint record being written puts the bytes of its large
    parts: each part is written as its SHA-256 (``"blob"``), and its bytes
    go to :attr:`new` (base64) unless an earlier record of the chain holds
    them already: those of a part in *parent* (the record's parent state),
    found on first need."""

    __slots__ = ("_known", "_parent", "by_hash", "new")

    def __init__(self, parent: object) -> None:
        self._parent = parent
        self._known: set[str] | None = None
        self.new: dict[str, str] = {}
        # Whether a part was written by its hash (a record without one
        # needs no blob source to be read back).
        self.by_hash = False

    def known(self, sha: str) -> bool:
        """Whether the parent state holds a part with these bytes."""
        if self._parent is None:
            return False
        if self._known is None:
            self._known = {digest(p) for p in large_parts(self._parent)}
        return sha in self._known


SINK: contextvars.ContextVar[BlobSink | None] = contextvars.ContextVar(
    "pipeline_blob_sink", default=None
)
"""The sink of the record being written (none: parts are written inline)."""

SOURCE: contextvars.ContextVar[Callable[[str], bytes | None] | None] = (
    contextvars.ContextVar("pipeline_blob_source", default=None)
)
"""Where a record being read finds the bytes of a part written by hash."""

_DIGESTS: weakref.WeakKeyDictionary[ImagePart | FilePart, str] = (
    weakref.WeakKeyDictionary()
)


def digest(p: ImagePart | FilePart) -> str:
    """The SHA-256 (hex) of a part's bytes, computed once per part."""
    found = _DIGESTS.get(p)
    if found is None:
        found = hashlib.sha256(p.data or b"").hexdigest()
        _DIGESTS[p] = found
    return found


def large_parts(value: object) -> Iterator[ImagePart | FilePart]:
    """The parts of at least :data:`BLOB_MIN` bytes in the messages inside
    *value* (a state: attrs classes, contexts, containers; iterative)."""
    stack = [value]
    while stack:
        v = stack.pop()
        kind = type(v)
        if kind is Message:
            m: Message = v  # type: ignore[assignment]
            for p in m.parts:
                if type(p) is not TextPart and p.size >= BLOB_MIN:
                    yield p
        elif kind in (str, bytes, int, float, bool) or v is None:
            continue
        elif isinstance(v, Context):
            stack.extend(v.messages)
        elif attrs.has(kind):
            stack.extend(getattr(v, f.name) for f in attrs.fields(kind))
        elif isinstance(v, Mapping):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple, PVector, frozenset, set)):
            stack.extend(v)


def part_unstructure(p: Part) -> dict[str, Any]:
    """A part as JSON: ``type`` (``text``, ``image``, ``file``), its text,
    URL or bytes (base64), media type, and a file's name when it has one.
    Inside a checkpoint record (a :data:`SINK` is set) a part of at least
    :data:`BLOB_MIN` bytes is written by its hash instead (``"blob"``).

    .. versionadded:: 0.1.0
    """
    if type(p) is TextPart:
        return {"type": "text", "text": p.text}
    if type(p) is ImagePart and p.data is None:
        out: dict[str, Any] = {"type": "image", "url": p.url}
        if p.media_type is not None:
            out["media_type"] = p.media_type
        return out
    assert type(p) is ImagePart or type(p) is FilePart  # noqa: S101
    data = p.data or b""
    out = {
        "type": "image" if type(p) is ImagePart else "file",
        "media_type": p.media_type,
    }
    sink = SINK.get()
    if sink is not None and len(data) >= BLOB_MIN:
        sha = digest(p)
        out["blob"] = sha
        sink.by_hash = True
        if sha not in sink.new and not sink.known(sha):
            sink.new[sha] = base64.b64encode(data).decode("ascii")
    else:
        out["data"] = base64.b64encode(data).decode("ascii")
    if type(p) is FilePart and p.name is not None:
        out["name"] = p.name
    return out


_PART_KEYS = {
    "text": ({"type", "text"}, set[str]()),
    "image": ({"type"}, {"url", "data", "blob", "media_type"}),
    "file": ({"type", "media_type"}, {"data", "blob", "name"}),
}


def _bytes_of(value: dict[str, Any], kind: str) -> bytes:
    """A part's bytes: inline (``data``) or by hash (``blob``), one of
    them."""
    if ("data" in value) == ("blob" in value):
        msg = f"{kind} part: exactly one of data and blob"
        raise ValueError(msg)
    if "data" in value:
        return _b64(value["data"])
    sha = value["blob"]
    source = SOURCE.get()
    found = (
        source(sha) if source is not None and isinstance(sha, str) else None
    )
    if found is None:
        msg = f"{kind} part: blob {str(sha)[:12]}... is in no record of the chain"
        raise ValueError(msg)
    return found


def _b64(value: object) -> bytes:
    if not isinstance(value, str):
        msg = f"data: expected base64 text, got {type(value).__name__}"
        raise TypeError(msg)
    try:
        return binascii.a2b_base64(value, strict_mode=True)
    except binascii.Error:
        msg = "data: not base64"
        raise ValueError(msg) from None


def _str_or_none(value: object, key: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    msg = f"{key}: expected a string, got {type(value).__name__}"
    raise TypeError(msg)


def part_structure(value: Any, _: Any) -> Part:
    """A part back from :func:`part_unstructure`'s JSON, strictly: known
    ``type``, no extra keys, base64 that decodes, the part's own checks.

    .. versionadded:: 0.1.0
    """
    if not isinstance(value, dict):
        msg = f"expected an object, got {type(value).__name__}"
        raise TypeError(msg)
    kind = value.get("type")
    if not isinstance(kind, str) or kind not in _PART_KEYS:
        msg = "part: type must be 'text', 'image' or 'file'"
        raise ValueError(msg)
    need, may = _PART_KEYS[kind]
    keys = set(value)
    if not need <= keys or keys - need - may:
        msg = (
            f"{kind} part: fields {sorted(keys)} are not {sorted(need | may)}"
        )
        raise ValueError(msg)
    if kind == "text":
        text = value["text"]
        if not isinstance(text, str):
            msg = "text part: text must be a string"
            raise TypeError(msg)
        return TextPart(text)
    media_type = _str_or_none(value.get("media_type"), "media_type")
    if kind == "image":
        if "url" not in value:
            return ImagePart(
                data=_bytes_of(value, kind), media_type=media_type
            )
        if "data" in value or "blob" in value:
            msg = "image part: a url, or bytes, not both"
            raise ValueError(msg)
        return ImagePart(
            url=_str_or_none(value.get("url"), "url"), media_type=media_type
        )
    return FilePart(
        data=_bytes_of(value, kind),
        media_type=media_type or "",
        name=_str_or_none(value.get("name"), "name"),
    )


def _thaw(value: object) -> Any:
    """Metadata to plain JSON values (iterative: depth is unbounded)."""
    if not isinstance(value, (tuple, Mapping)):
        return _finite(value) if type(value) is float else value
    root: list[Any] = []
    stack: list[
        tuple[object, list[Any] | dict[str, Any], str | int | None]
    ] = [(value, root, None)]
    while stack:
        node, parent, key = stack.pop()
        if isinstance(node, tuple):
            out: Any = [None] * len(node)
            stack.extend((v, out, i) for i, v in enumerate(node))
        elif isinstance(node, Mapping):
            out = {}
            stack.extend((v, out, k) for k, v in node.items())
        else:
            out = _finite(node) if type(node) is float else node
        if key is None:
            root.append(out)
        else:
            parent[key] = out  # type: ignore[index]
    return root[0]
