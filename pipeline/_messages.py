"""Messages of a conversation and their parts: roles, tool calls, usage,
and content parts (text, images, files).

A light module on purpose: model adapters, tools, events and histories
need messages without the context machinery.
"""

from __future__ import annotations

import enum
import re

from collections.abc import Iterable
from typing import TypeAlias, final

import attrs

from .errors import InvalidPart


__all__ = (
    "FilePart",
    "ImagePart",
    "Message",
    "Part",
    "Role",
    "TextPart",
    "ToolCall",
    "Usage",
)


@final
class Role(enum.StrEnum):
    """Who wrote a message.

    .. versionadded:: 0.1.0
    """

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


@final
@attrs.frozen
class ToolCall:
    """A model's request to call a tool; *arguments* is a JSON object text.

    .. versionadded:: 0.1.0
    """

    id: str
    name: str
    arguments: str = "{}"


@final
@attrs.frozen
class Usage:
    """Token usage reported by a model for one response.

    .. versionadded:: 0.1.0
    """

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if not (self.input_tokens or self.output_tokens):
            return other  # nothing to add to (a run's first turn): as it is
        # Sums of two usages' counts need no converting nor checking: set
        # directly, without attrs' generic __init__ (an agent adds one per
        # turn).
        out = _new(Usage)
        _set_input_tokens(out, self.input_tokens + other.input_tokens)
        _set_output_tokens(out, self.output_tokens + other.output_tokens)
        return out


_new = object.__new__
_set_input_tokens = Usage.__dict__["input_tokens"].__set__
_set_output_tokens = Usage.__dict__["output_tokens"].__set__


_MEDIA_TYPE = re.compile(
    r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}"
)
"""``type/subtype`` (RFC 6838 names, lower case; no parameters)."""


def _media_type(kind: str, value: object, prefix: str = "") -> str:
    if not isinstance(value, str) or not _MEDIA_TYPE.fullmatch(value):
        msg = f"{kind}: media_type must be a 'type/subtype' string"
        raise InvalidPart(msg)
    if not value.startswith(prefix):
        msg = f"{kind}: media_type must start with {prefix!r}"
        raise InvalidPart(msg)
    return value


def _bytes(kind: str, value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    msg = f"{kind}: data must be bytes, got {type(value).__name__}"
    raise InvalidPart(msg)


def _str(what: str, value: object) -> None:
    if not isinstance(value, str):
        msg = f"{what} must be a str, got {type(value).__name__}"
        raise InvalidPart(msg)


def _size(data: bytes) -> str:
    return f"<{len(data):,} bytes>"


@final
@attrs.frozen
class TextPart:
    """Text inside a message made of parts.

    .. versionadded:: 0.1.0
    """

    text: str

    def __attrs_post_init__(self) -> None:
        _str("TextPart: text", self.text)


@final
@attrs.frozen(repr=False)
class ImagePart:
    """An image: its bytes and media type, or a URL the provider fetches.

    >>> ImagePart(data=b"png bytes", media_type="image/png")
    ImagePart(data=<9 bytes>, media_type='image/png')
    >>> ImagePart(url="https://example.com/cat.png?sig=abc")
    ImagePart(url=<https://example.com/...>, media_type=None)

    Exactly one of *data* and *url*.  *media_type* (``image/...``) is
    required with *data*; with *url* it is optional (providers read it from
    the response).  The repr shows sizes, media types and a URL's host,
    never bytes, paths or query strings (a signed URL's token stays out of
    logs).

    Raises:
        InvalidPart: neither or both of *data* and *url*, *data* not
            bytes or empty, a missing or non-image media type, a URL that is not
            ``http(s)``.

    .. versionadded:: 0.1.0
    """

    data: bytes | None = attrs.field(default=None, kw_only=True)
    url: str | None = attrs.field(default=None, kw_only=True)
    media_type: str | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if (self.data is None) == (self.url is None):
            msg = "ImagePart: give exactly one of data and url"
            raise InvalidPart(msg)
        if self.data is not None:
            object.__setattr__(self, "data", _bytes("ImagePart", self.data))
            if not self.data:
                # No image is 0 bytes: the provider would refuse the whole
                # request (a 400) after it was sent.
                msg = "ImagePart: data is empty"
                raise InvalidPart(msg)
            _media_type("ImagePart", self.media_type, "image/")
        else:
            if not isinstance(self.url, str) or not _host(self.url):
                msg = "ImagePart: url must be an http:// or https:// URL"
                raise InvalidPart(msg)
            if self.media_type is not None:
                _media_type("ImagePart", self.media_type, "image/")

    @property
    def size(self) -> int:
        """The bytes held (0 for an image by URL)."""
        return 0 if self.data is None else len(self.data)

    def __repr__(self) -> str:
        if self.data is not None:
            return (
                f"ImagePart(data={_size(self.data)}, "
                f"media_type={self.media_type!r})"
            )
        return (
            f"ImagePart(url=<{_host(self.url or '')}/...>, "
            f"media_type={self.media_type!r})"
        )


def _host(url: str) -> str:
    """``scheme://host`` of an http(s) URL, or ``""``."""
    match = _URL.fullmatch(url)
    return f"{match.group(1)}{match.group(2)}".lower() if match else ""


_URL = re.compile(
    r"(https?://)(?:[^/?#@\s]*@)?([^/?#@\s]+)(?:[/?#]\S*)?", re.IGNORECASE
)
"""An http(s) URL: its scheme, user info (never shown), host, rest."""


@final
@attrs.frozen(repr=False)
class FilePart:
    """A file or document (a PDF, a text file) by its bytes and media type.

    >>> FilePart(data=b"%PDF-1.7 ...", media_type="application/pdf",
    ...          name="report.pdf")
    FilePart(data=<12 bytes>, media_type='application/pdf')

    *name* is the file name providers may show the model; the repr leaves
    it out with the bytes.  Which media types a provider takes is the
    adapter's to say (Anthropic: PDF and ``text/plain``).

    Raises:
        InvalidPart: *data* not bytes, *media_type* not ``type/subtype``,
            *name* not a string.

    .. versionadded:: 0.1.0
    """

    data: bytes = attrs.field(kw_only=True)
    media_type: str = attrs.field(kw_only=True)
    name: str | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "data", _bytes("FilePart", self.data))
        _media_type("FilePart", self.media_type)
        if self.name is not None:
            _str("FilePart: name", self.name)

    @property
    def size(self) -> int:
        """The bytes held."""
        return len(self.data)

    def __repr__(self) -> str:
        return (
            f"FilePart(data={_size(self.data)}, "
            f"media_type={self.media_type!r})"
        )


Part: TypeAlias = TextPart | ImagePart | FilePart
"""One part of a message's content.

.. versionadded:: 0.1.0
"""

_PART_TYPES = (TextPart, ImagePart, FilePart)


def _to_parts(parts: Iterable[Part | str]) -> tuple[Part, ...]:
    if parts == ():
        return ()
    if isinstance(parts, str | bytes):
        msg = "Message: parts must be a sequence of parts, not a string"
        raise InvalidPart(msg)
    out: list[Part] = []
    items: Iterable[object] = parts
    for i, p in enumerate(items):
        if isinstance(p, str):
            out.append(TextPart(p))
        elif isinstance(p, _PART_TYPES):
            out.append(p)
        else:
            msg = (
                f"Message: part {i} must be a str, TextPart, ImagePart or "
                f"FilePart, got {type(p).__name__}"
            )
            raise InvalidPart(msg)
    return tuple(out)


def text_of(parts: Iterable[Part]) -> str:
    """The text parts of *parts*, joined by newlines."""
    return "\n".join(p.text for p in parts if type(p) is TextPart)


def _to_tool_calls(calls: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
    return tuple(calls)


@final
@attrs.frozen
class Message:
    """One message of a conversation.

    >>> Message.user("hi")
    Message(role=<Role.USER: 'user'>, content='hi', name=None, tool_calls=(), \
tool_call_id=None, usage=None, agent=None, parts=())

    *content* is the message's text, always a ``str``.  A message may also
    carry images and files: then *parts* holds its whole content in order
    (text, :class:`ImagePart`, :class:`FilePart`) and *content* is the
    text of its text parts, joined by newlines; a message of text alone
    has no parts.

    >>> m = Message.user(["What is in this picture?",
    ...                   ImagePart(url="https://example.com/cat.png")])
    >>> m.content, len(m.parts)
    ('What is in this picture?', 2)

    Given both, *content* must be that text (or empty: it is filled in);
    given parts without text, a non-empty *content* goes first as their
    text.  Parts that are one text alone make the plain text message.

    *agent* names the agent whose run added it (its answers and the results
    of its tool calls), so the sub-agents' work stays attributable inside a
    merged conversation.  Providers never see it.

    .. versionadded:: 0.1.0
    """

    role: Role = attrs.field(converter=Role)
    content: str = ""
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = attrs.field(
        default=(), converter=_to_tool_calls
    )
    tool_call_id: str | None = None
    usage: Usage | None = None
    agent: str | None = None
    parts: tuple[Part, ...] = attrs.field(default=(), converter=_to_parts)

    def __attrs_post_init__(self) -> None:
        parts = self.parts
        if not parts:
            return
        if self.content and not any(type(p) is TextPart for p in parts):
            parts = (TextPart(self.content), *parts)
            object.__setattr__(self, "parts", parts)
        text = text_of(parts)
        if self.content and self.content != text:
            msg = (
                "Message: content must be empty or the text of its parts "
                "(joined by newlines)"
            )
            raise InvalidPart(msg)
        object.__setattr__(self, "content", text)
        if len(parts) == 1 and type(parts[0]) is TextPart:
            object.__setattr__(self, "parts", ())  # text alone: plain

    @classmethod
    def system(cls, content: str) -> Message:
        """A system message."""
        return built(Role.SYSTEM, content, None, (), None, None, None, ())

    @classmethod
    def user(
        cls, content: str | Iterable[Part | str], *, name: str | None = None
    ) -> Message:
        """A user message: text, or parts (strings are text parts).

        .. versionchanged:: 0.1.0
           *content* may be parts: text, images and files.
        """
        if isinstance(content, str):  # as the constructor makes it
            return built(Role.USER, content, name, (), None, None, None, ())
        return cls(Role.USER, "", name, parts=_to_parts(content))

    @classmethod
    def assistant(
        cls,
        content: str = "",
        *,
        name: str | None = None,
        tool_calls: Iterable[ToolCall] = (),
        usage: Usage | None = None,
    ) -> Message:
        """An assistant message, possibly asking for tool calls."""
        # Text alone (no parts): the fields are what the converters would
        # make of them, so none runs (W4 builds one per step).
        return built(
            Role.ASSISTANT,
            content,
            name,
            tuple(tool_calls),
            None,
            usage,
            None,
            (),
        )

    @classmethod
    def tool(
        cls,
        content: str | Iterable[Part | str],
        *,
        tool_call_id: str,
        name: str | None = None,
        agent: str | None = None,
    ) -> Message:
        """The result of a tool call, answering *tool_call_id*: text, or
        parts (an image a tool made, say)."""
        if isinstance(content, str):  # checked: built without converters
            return built(
                Role.TOOL, content, name, (), tool_call_id, None, agent, ()
            )
        return cls(
            Role.TOOL,
            "",
            name,
            (),
            tool_call_id,
            None,
            agent,
            _to_parts(content),
        )


def built(
    role: Role,
    content: str,
    name: str | None,
    tool_calls: tuple[ToolCall, ...],
    tool_call_id: str | None,
    usage: Usage | None,
    agent: str | None,
    parts: tuple[Part, ...],
) -> Message:
    """A :class:`Message` of fields already in the form its constructor
    gives them (converted and checked: taken from another message, say),
    built without running the converters and checks again."""
    out = _new(Message)
    _set_role(out, role)
    _set_content(out, content)
    _set_name(out, name)
    _set_tool_calls(out, tool_calls)
    _set_tool_call_id(out, tool_call_id)
    _set_usage(out, usage)
    _set_agent(out, agent)
    _set_parts(out, parts)
    return out


# Each field's slot, set directly (frozen: no __setattr__ to go through):
# object.__setattr__ would look each name up again.
_set_role = Message.__dict__["role"].__set__
_set_content = Message.__dict__["content"].__set__
_set_name = Message.__dict__["name"].__set__
_set_tool_calls = Message.__dict__["tool_calls"].__set__
_set_tool_call_id = Message.__dict__["tool_call_id"].__set__
_set_usage = Message.__dict__["usage"].__set__
_set_agent = Message.__dict__["agent"].__set__
_set_parts = Message.__dict__["parts"].__set__
