"""Structure hooks for messages that skip cattrs' generic cost when the
stored form is the plain, valid one; and, for a commit's check, how to
compare a stored message, usage or scalar with the live one in place.

Every checkpoint commit reads its new messages back to check them (see
``Codec.seal``), and every resume reads them all: cattrs' generated hook
spends most of that time dispatching per field.  The hooks here build the
message directly when each field already has its exact JSON kind (a
``str`` role naming a :class:`~pipeline.Role`, ``str`` or ``None`` texts,
tool calls and usage of their own plain shape, no parts), which is the
value the generated hook would build; anything else (parts, a missing or
unknown key, a wrong kind) goes to the generated hook, which builds it or
says what is wrong exactly as before.
"""

from __future__ import annotations

import weakref

from collections.abc import Callable
from typing import Any

import cattrs

from ._messages import Message, Role, ToolCall, Usage, built


__all__ = ("register_message_hooks", "same_for", "scalar_kind")

Hook = Callable[[Any, Any], Any]

_ROLES: dict[str, Role] = {r.value: r for r in Role}
_MESSAGE_KEYS = frozenset(
    (
        "role",
        "content",
        "name",
        "tool_calls",
        "tool_call_id",
        "usage",
        "agent",
        "parts",
    )
)
_CALL_KEYS = frozenset(("id", "name", "arguments"))
_USAGE_KEYS = frozenset(("input_tokens", "output_tokens"))
_NO_KEY = object()
_NO_PARTS: list[Any] = []  # an absent "parts" reads as none
Same = Callable[[Any, Any], bool]
_SAME: weakref.WeakKeyDictionary[Hook, tuple[type, Same]] = (
    weakref.WeakKeyDictionary()
)
"""For a hook of ours: the type it reads values back as, and how to tell
in place whether a stored value reads back equal to a live one."""
_SCALAR_KIND: weakref.WeakKeyDictionary[Same, type] = (
    weakref.WeakKeyDictionary()
)
"""For the comparison of a strict scalar field (see :func:`_same_scalar`):
its scalar type."""


def register_message_hooks(conv: cattrs.Converter) -> None:
    """Give *conv* the fast hooks for :class:`Message` and
    :class:`Usage`, each falling back to the hook cattrs generates (made
    on first need: most converters never read a message)."""
    general: dict[type, Hook] = {}

    def fallback(t: type) -> Hook:
        hook = general.get(t)
        if hook is None:
            hook = general[t] = conv.gen_structure_attrs_fromdict(t)
        return hook

    def message(value: Any, t: Any) -> Message:
        out = plain_message(value)
        return fallback(Message)(value, t) if out is None else out

    def usage(value: Any, t: Any) -> Usage:
        out = plain_usage(value)
        return fallback(Usage)(value, t) if out is None else out

    conv.register_structure_hook(Message, message)
    conv.register_structure_hook(Usage, usage)
    _SAME[message] = (Message, same_message)
    _SAME[usage] = (Usage, same_usage)
    # The strict scalar hooks make_converter registered just before.
    # (Not float: its hook refuses infinities, which compare equal.)
    for kind in (int, str, bool):
        _SAME[conv.get_structure_hook(kind)] = (kind, _same_scalar(kind))


def same_for(hook: Any, t: Any) -> Same | None:
    """For *hook*, a converter's structure hook for type *t*: if it is one
    of :func:`register_message_hooks` (for *t* itself, not a subclass
    that shares it), how to tell whether a stored value reads back equal
    to a live one without building it (see :func:`same_message`); else
    ``None``."""
    try:
        known = _SAME.get(hook)
    except TypeError:  # not weakly referenceable: none of ours
        return None
    return known[1] if known is not None and known[0] is t else None


def scalar_kind(same: Same | None) -> type | None:
    """The scalar type (``int``, ``str``, ``bool``) of a field whose
    comparison :func:`same_for` gave as *same*, if it is a strict scalar
    field's: a value of exactly that type reads back as itself."""
    if same is None:
        return None
    try:
        return _SCALAR_KIND.get(same)
    except TypeError:  # pragma: no cover  # not weakly referenceable
        return None


def _same_scalar(kind: type) -> Same:
    """For ``int``, ``str`` and ``bool``: their strict hooks give a stored
    value of exactly that type back as it is (anything else, ``None``
    included, is theirs to refuse)."""

    def same(stored: Any, live: Any) -> bool:
        return type(stored) is kind and type(live) is kind and stored == live

    _SCALAR_KIND[same] = kind
    return same


def plain_message(o: Any) -> Message | None:
    """The message *o* stores, if it is in the plain form; else ``None``
    (the generated hook decides)."""
    if type(o) is not dict or not _MESSAGE_KEYS.issuperset(o):
        return None
    member = _role(o.get("role"))
    content = o.get("content", "")
    name = o.get("name")
    tool_call_id = o.get("tool_call_id")
    agent = o.get("agent")
    if not (
        member is not None
        and type(content) is str
        and (name is None or type(name) is str)
        and (tool_call_id is None or type(tool_call_id) is str)
        and (agent is None or type(agent) is str)
    ):
        return None
    parts = o.get("parts", _NO_KEY)
    if parts is not _NO_KEY and not (type(parts) is list and not parts):
        return None  # parts: their own checks, blobs and all
    tool_calls = _plain_calls(o.get("tool_calls", _NO_KEY))
    stored_usage = o.get("usage")
    usage = None if stored_usage is None else plain_usage(stored_usage)
    if tool_calls is None or (usage is None and stored_usage is not None):
        return None
    return built(
        member, content, name, tool_calls, tool_call_id, usage, agent, ()
    )


def _role(role: Any) -> Role | None:
    if type(role) is str:
        return _ROLES.get(role)
    if type(role) is Role:  # a document checked before it is written
        return role
    return None


def _plain_calls(calls: Any) -> tuple[ToolCall, ...] | None:
    if calls is _NO_KEY:
        return ()
    if type(calls) is not list:
        return None
    made = []
    for c in calls:
        call = _plain_call(c)
        if call is None:
            return None
        made.append(call)
    return tuple(made)


def _plain_call(c: Any) -> ToolCall | None:
    if type(c) is not dict or not _CALL_KEYS.issuperset(c):
        return None
    id_ = c.get("id")
    name = c.get("name")
    arguments = c.get("arguments", "{}")
    if type(id_) is str and type(name) is str and type(arguments) is str:
        return ToolCall(id_, name, arguments)
    return None


def plain_usage(o: Any) -> Usage | None:
    """The usage *o* stores, if in the plain form (``int`` counts, not
    ``bool``); else ``None``."""
    if type(o) is not dict or not _USAGE_KEYS.issuperset(o):
        return None
    i = o.get("input_tokens", 0)
    n = o.get("output_tokens", 0)
    if type(i) is int and type(n) is int:
        return Usage(i, n)
    return None


def same_message(stored: Any, live: Any) -> bool:
    """Whether *stored*, in the plain form, reads back as a message equal
    to *live* (what the check of a commit asks), decided without building
    it; ``False`` when not sure: the general way then decides.

    Texts must be of type ``str`` on both sides (a subclass could compare
    equal and still not be what comes back), or ``None`` on both.
    """
    if (
        type(live) is not Message
        or type(stored) is not dict
        or not _MESSAGE_KEYS.issuperset(stored)
    ):
        return False
    get = stored.get
    role = get("role")
    content = get("content", "")
    usage = get("usage")
    parts = get("parts", _NO_PARTS)
    calls = get("tool_calls", _NO_KEY)
    # Typed object: what a field holds at run time is what is checked.
    live_role: object = live.role
    live_content: object = live.content
    live_calls: object = live.tool_calls
    # Written out, but for the optional texts: this runs for every message
    # of every commit (a message without calls, most, tests no call list).
    return (
        type(live_role) is Role
        and (role is live_role or _role(role) is live_role)
        and type(content) is str
        and type(live_content) is str
        and content == live_content
        and _same_text(get("name"), live.name)
        and _same_text(get("tool_call_id"), live.tool_call_id)
        and _same_text(get("agent"), live.agent)
        and live.parts == ()
        and type(parts) is list
        and not parts
        and type(live_calls) is tuple
        and (
            _same_calls(calls, live_calls)
            if live_calls
            else calls is _NO_KEY or (type(calls) is list and not calls)
        )
        and (
            live.usage is None
            if usage is None
            else same_usage(usage, live.usage)
        )
    )


def _same_text(stored: Any, live: object) -> bool:
    """Whether an optional text reads back as *live*: ``None`` on both
    sides, or equal and exactly ``str`` on both (a subclass could compare
    equal and still not be what comes back)."""
    if stored is None:
        return live is None
    return type(stored) is str and type(live) is str and stored == live


def same_usage(stored: Any, live: Any) -> bool:
    """:func:`same_message` for usage."""
    if type(live) is not Usage:
        return False
    if type(stored) is not dict or not _USAGE_KEYS.issuperset(stored):
        return False
    i = stored.get("input_tokens", 0)
    n = stored.get("output_tokens", 0)
    return (
        type(i) is int
        and type(n) is int
        and type(live.input_tokens) is int
        and type(live.output_tokens) is int
        and i == live.input_tokens
        and n == live.output_tokens
    )


def _same_calls(stored: Any, live: tuple[Any, ...]) -> bool:
    """Whether stored tool calls read back as *live*'s (not empty)."""
    if type(stored) is not list or len(stored) != len(live):
        return False
    for s, c in zip(stored, live):  # noqa: B905  # lengths equal (above)
        if (
            type(c) is not ToolCall
            or type(s) is not dict
            or not _CALL_KEYS.issuperset(s)
        ):
            return False
        get = s.get
        id_ = get("id")
        name = get("name")
        arguments = get("arguments", "{}")
        # Typed object: what a field holds at run time is what is checked.
        live_id: object = c.id
        live_name: object = c.name
        live_arguments: object = c.arguments
        if not (
            type(id_) is str
            and type(name) is str
            and type(arguments) is str
            and type(live_id) is str
            and type(live_name) is str
            and type(live_arguments) is str
            and id_ == live_id
            and name == live_name
            and arguments == live_arguments
        ):
            return False
    return True
