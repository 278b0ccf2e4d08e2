"""What the adapters share about images and files: size limits, what a
provider takes where, base64."""

from __future__ import annotations

import base64

from collections.abc import Sequence
from typing import final

import attrs

from .._messages import FilePart, ImagePart, Message, Role, TextPart


__all__ = ("PartLimits", "Takes", "b64", "data_url", "refusal")

_MIB = 2**20


def _positive(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if type(value) is not int or value < 1:
        msg = f"PartLimits({attribute.name}): must be a positive int"
        raise ValueError(msg)


@final
@attrs.frozen
class PartLimits:
    """The most bytes of images and files an adapter sends in one request,
    checked before anything is sent: one image, one file, and all parts
    together as sent (base64 makes 4 bytes of every 3).

    An adapter's defaults follow its provider's documented limits
    (:class:`~pipeline.models.openai.OpenAIModel`: 20 MiB an image, 32 MiB
    a file, 50 MiB a request;
    :class:`~pipeline.models.anthropic.AnthropicModel`: 5 MiB an image,
    32 MiB a file and a request); give your own for a server with others.
    Past a limit the call fails with a :class:`~pipeline.failures.ModelError`
    naming the message, the part, its size and the limit, and the request
    is never sent.

    .. versionadded:: 0.1.0
    """

    image: int = attrs.field(validator=_positive)
    file: int = attrs.field(validator=_positive)
    request: int = attrs.field(validator=_positive)


@final
@attrs.frozen
class Takes:
    """What a provider takes: images and files in which roles' messages,
    of which media types (``None``: any), and text files only as UTF-8."""

    provider: str
    roles: frozenset[Role] = frozenset({Role.USER, Role.TOOL})
    images: frozenset[str] | None = None
    files: frozenset[str] | None = None
    utf8: frozenset[str] = frozenset()


def _where(index: int, message: Message, part: int) -> str:
    return f"message {index} ({message.role.value}), part {part}"


def _size(size: int) -> str:
    return f"{size / _MIB:.1f} MiB" if size >= _MIB else f"{size:,} bytes"


def _types(kinds: frozenset[str]) -> str:
    return ", ".join(sorted(kinds))


def _refuse(
    p: ImagePart | FilePart, takes: Takes, limits: PartLimits
) -> str | None:
    """Why *p* cannot go, wherever it stands, or None."""
    if type(p) is ImagePart:
        kind, article, limit, kinds = "image", "an", limits.image, takes.images
        if p.data is None:
            return None
    else:
        kind, article, limit, kinds = "file", "a", limits.file, takes.files
    if kinds is not None and p.media_type not in kinds:
        return (
            f"{takes.provider} takes {kind}s of types {_types(kinds)}, "
            f"not {p.media_type}"
        )
    if p.size > limit:
        return (
            f"{kind} of {_size(p.size)} is over the limit of {_size(limit)} "
            f"{article} {kind}"
        )
    if type(p) is FilePart and p.media_type in takes.utf8:
        try:
            p.data.decode("utf-8")
        except UnicodeDecodeError:
            return f"a {p.media_type} file that is not UTF-8"
    return None


def refusal(
    messages: Sequence[Message], takes: Takes, limits: PartLimits
) -> str | None:
    """Why the images and files of *messages* cannot be sent (the message
    and part, the rule; never their contents), or None."""
    total = 0
    for i, m in enumerate(messages):
        for j, p in enumerate(m.parts):
            if type(p) is TextPart:
                continue
            if m.role not in takes.roles:
                kind = "image" if type(p) is ImagePart else "file"
                return (
                    f"{_where(i, m, j)}: {takes.provider} takes no {kind} in "
                    f"a {m.role.value} message"
                )
            why = _refuse(p, takes, limits)
            if why is not None:
                return f"{_where(i, m, j)}: {why}"
            total += -(-p.size // 3) * 4
    if total > limits.request:
        return (
            f"images and files of {_size(total)} (as base64) are over the "
            f"limit of {_size(limits.request)} a request"
        )
    return None


def b64(data: bytes) -> str:
    """*data* as base64 text."""
    return base64.b64encode(data).decode("ascii")


def data_url(part: ImagePart | FilePart) -> str:
    """A ``data:`` URL of a part's bytes (an image by URL: its URL)."""
    if type(part) is ImagePart and part.data is None:
        return part.url or ""
    data = part.data or b""
    return f"data:{part.media_type};base64,{b64(data)}"
