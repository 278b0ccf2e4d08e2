"""Type-level contract of messages with parts. Checked, never executed."""

# pyright: reportUnnecessaryTypeIgnoreComment=error

from __future__ import annotations

from typing import assert_type

from pipeline import FilePart, ImagePart, Message, Part, TextPart
from pipeline.history import part_tokens
from pipeline.models import PartLimits
from pipeline.models.anthropic import AnthropicModel
from pipeline.models.openai import OpenAIModel


png = ImagePart(data=b"...", media_type="image/png")
pdf = FilePart(data=b"%PDF", media_type="application/pdf", name="a.pdf")
m = Message.user(["Describe", png, pdf])

# content stays a str: code written for text messages type-checks as is.
assert_type(m.content, str)
assert_type(m.content.upper(), str)
assert_type(m.parts, tuple[Part, ...])
assert_type(Message.user("hi").content, str)
assert_type(Message.tool(["chart", png], tool_call_id="c"), Message)
assert_type(png.data, bytes | None)
assert_type(png.url, str | None)
assert_type(pdf.data, bytes)
assert_type(pdf.size, int)
assert_type(part_tokens(pdf), int)

for part in m.parts:
    if isinstance(part, TextPart):
        assert_type(part.text, str)
    elif isinstance(part, ImagePart):
        assert_type(part.media_type, str | None)
    else:
        assert_type(part, FilePart)

# Wrong: bytes where text goes, a str where bytes go, positional fields,
# something that is not a part.
Message.user(b"hi")  # type: ignore[arg-type]
ImagePart(data="...", media_type="image/png")  # type: ignore[arg-type]
ImagePart(b"...", "image/png")  # type: ignore[call-arg]
FilePart(data=b"x")  # type: ignore[call-arg]
Message.user(["a", 3])  # type: ignore[list-item]
m.content = "x"  # type: ignore[misc]

# Adapter limits: byte counts (ints).
limits = PartLimits(image=5 * 2**20, file=32 * 2**20, request=32 * 2**20)
assert_type(limits.image, int)
assert_type(OpenAIModel("m", part_limits=limits).part_limits, PartLimits)
assert_type(AnthropicModel("m", part_limits=limits).part_limits, PartLimits)
PartLimits(image="5MB", file=1, request=1)  # type: ignore[arg-type]
OpenAIModel("m", part_limits=1024)  # type: ignore[arg-type]
