"""History policies: the view of a conversation an agent sees on entry.

A policy selects messages; it never changes the full history, which is
kept elsewhere (by the swarm, the graph or the caller)::

    >>> import anyio
    >>> from pipeline import Message
    >>> history = (
    ...     Message.system("Be brief."),
    ...     Message.user("hi"),
    ...     Message.assistant("hello"),
    ...     Message.user("bye"),
    ... )
    >>> view = anyio.run(window(1).select, history).unwrap()
    >>> [m.content for m in view]
    ['Be brief.', 'bye']

Definitions every policy shares:

* The *preamble* is every message before the first ``USER`` message
  (system prompts, a greeting).  It is always kept whole.  Without any
  ``USER`` message there is nothing to cut: every policy returns its input
  unchanged.
* A *turn* starts at a ``USER`` message and runs up to the next one.
* A tool call and its result are a *pair*: an ``ASSISTANT`` message holding
  the call and the ``TOOL`` message whose *tool_call_id* answers it (the
  nearest call with that id before it; a result with no such call is a
  plain message).  A policy never separates a pair.  Policies cut the
  history once, keeping the preamble and a suffix; a suffix starting at
  index *i* is a *safe cut* when no call before *i* (and after the
  preamble) has its result at or after *i*.  The end of the history is
  always a safe cut.  A result answering a call made *in* the preamble
  stays with the preamble: it is kept, in place, wherever the cut falls.

Every policy keeps the order of the messages it keeps (its output, a
summary aside, is a subsequence of its input) and runs in time linear in
the length of the history.
"""

from __future__ import annotations

import re

from collections.abc import Callable, Sequence
from itertools import accumulate, chain
from typing import Protocol, TypeAlias, final

import attrs

from returns.pipeline import is_successful
from returns.result import Failure, Result, Success

from ._messages import FilePart, ImagePart, Message, Part, Role, TextPart
from .errors import ConstructionError
from .failures import HistoryBudgetExceeded, ModelError
from .models._types import Model, ModelRequest
from .runs import generate


__all__ = (
    "DEFAULT_SUMMARY_INSTRUCTIONS",
    "IMAGE_TOKENS",
    "PDF_PAGE_TOKENS",
    "SUMMARY_PREFIX",
    "Full",
    "HistoryError",
    "HistoryPolicy",
    "Summarizing",
    "TokenBudget",
    "Window",
    "approximate_tokens",
    "full",
    "part_tokens",
    "summarizing",
    "token_budget",
    "window",
)

HistoryError: TypeAlias = HistoryBudgetExceeded | ModelError
"""What a history policy may fail with."""

DEFAULT_SUMMARY_INSTRUCTIONS = (
    "You summarise the earlier part of a conversation for an assistant that "
    "will carry it on without seeing it. Keep the facts, names, numbers, "
    "decisions, tool results and open questions that may matter later; drop "
    "greetings and repetition. Write a few short paragraphs in the third "
    "person and answer with the summary only."
)
"""The system prompt :func:`summarizing` sends with the dropped messages."""

SUMMARY_PREFIX = "Summary of the earlier conversation:\n"
"""How the content of a summary message starts (it is a system message)."""

_MESSAGE_OVERHEAD = 4  # role and separators, as chat formats spend them
_CHARS_PER_TOKEN = 4


class HistoryPolicy(Protocol):
    """Selects the messages an agent sees on entry; the full history is kept elsewhere.

    .. versionadded:: 0.1.0
    """

    async def select(
        self, messages: Sequence[Message], /
    ) -> Result[tuple[Message, ...], HistoryError]:
        """Return the view of *messages* to show, or why there is none."""
        ...


def approximate_tokens(message: Message) -> int:
    """Estimate the tokens of *message* without a tokenizer.

    About four characters a token, counting the content, the author's
    name and each tool call's name and arguments, plus a small overhead
    per message; images and files count as :func:`part_tokens` says.
    Good enough for budgets with some headroom; give :func:`token_budget`
    a real tokenizer's count when it must be exact.

    >>> approximate_tokens(Message.user("x" * 40))
    14

    .. versionadded:: 0.1.0
    """
    chars = len(message.content) + len(message.name or "")
    for call in message.tool_calls:
        chars += len(call.name) + len(call.arguments)
    extra = sum(
        part_tokens(p) for p in message.parts if type(p) is not TextPart
    )
    return _MESSAGE_OVERHEAD + -(-chars // _CHARS_PER_TOKEN) + extra


IMAGE_TOKENS = 1600
"""What :func:`part_tokens` counts for an image: about the most providers
charge for one after they scale it down (Anthropic: width * height / 750,
at most about 1,600; OpenAI: at most about 1,100 in high detail).

.. versionadded:: 0.1.0
"""

PDF_PAGE_TOKENS = 2300
"""What :func:`part_tokens` counts for a page of a PDF (its text and its
picture: Anthropic gives 1,500 to 3,000 tokens a page).

.. versionadded:: 0.1.0
"""

_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
_BYTES_PER_TOKEN = 32
"""For a file whose tokens cannot be guessed better: a rough, generous
count by size."""


def part_tokens(part: Part) -> int:
    """Estimate the tokens of one part of a message, without decoding it.

    Text counts as text (about four characters a token); an image
    ``IMAGE_TOKENS``, whatever its size; a PDF ``PDF_PAGE_TOKENS``
    for each page object it holds; a text file (``text/...``, JSON) by its
    characters; any other file one token per 32 bytes.  A message's text
    parts are also its *content*: :func:`approximate_tokens` counts that
    text once, and only the other parts here.

    >>> part_tokens(ImagePart(url="https://example.com/cat.png"))
    1600

    .. versionadded:: 0.1.0
    """
    if type(part) is TextPart:
        return -(-len(part.text) // _CHARS_PER_TOKEN)
    if type(part) is ImagePart:
        return IMAGE_TOKENS
    assert type(part) is FilePart  # noqa: S101  # the Part union is closed
    size = len(part.data)
    if part.media_type == "application/pdf":
        pages = len(_PDF_PAGE.findall(part.data))
        if pages:
            return pages * PDF_PAGE_TOKENS
    if part.media_type.startswith("text/") or part.media_type.endswith(
        ("/json", "+json", "/xml", "+xml")
    ):
        return -(-size // _CHARS_PER_TOKEN)
    return -(-size // _BYTES_PER_TOKEN)


# -- the shape of a history ---------------------------------------------------


@final
@attrs.frozen
class _Shape:
    """What a history's cuts depend on, found in one pass.

    *start* is the preamble's length, *users* the indices of the ``USER``
    messages, *pinned* the indices after the preamble of results answering
    calls made in it, and *depth[i]* the number of pairs a cut at *i*
    would split (empty when no pair follows the preamble).
    """

    start: int
    users: list[int]
    pinned: list[int]
    depth: list[int]

    def safe(self, cut: int) -> bool:
        """Whether a suffix may start at *cut* (for ``cut >= start``)."""
        return not self.depth or self.depth[cut] == 0


_USER, _ASSISTANT, _TOOL = Role.USER, Role.ASSISTANT, Role.TOOL


def _shape(messages: Sequence[Message]) -> _Shape | None:
    """Analyse *messages*; ``None`` when there is no ``USER`` message."""
    users = [i for i, m in enumerate(messages) if m.role is _USER]
    if not users:
        return None
    start = users[0]
    # open_calls maps a call id to the latest message making that call;
    # each pair (a, r) after the preamble makes the cuts a+1..r unsafe,
    # counted with a difference array so the whole pass stays O(n).
    open_calls: dict[str, int] = {}
    spans: list[int] = []
    pinned: list[int] = []
    for j, m in enumerate(messages):
        role = m.role
        if role is _ASSISTANT:
            for call in m.tool_calls:
                open_calls[call.id] = j
        elif role is _TOOL and m.tool_call_id is not None:
            a = open_calls.get(m.tool_call_id)
            if a is None:
                continue  # answers no call: a plain message
            if a >= start:
                if not spans:
                    spans = [0] * (len(messages) + 2)
                spans[a + 1] += 1
                spans[j + 1] -= 1
            elif j >= start:
                pinned.append(j)
    depth = list(accumulate(spans)) if spans else []
    return _Shape(start, users, pinned, depth)


def _view(
    messages: Sequence[Message], shape: _Shape, cut: int
) -> tuple[Message, ...]:
    """The preamble, the results pinned to it, and the suffix from *cut*."""
    kept = (messages[j] for j in shape.pinned if j < cut)
    return tuple(chain(messages[: shape.start], kept, messages[cut:]))


# -- policies -----------------------------------------------------------------


@final
@attrs.frozen
class Full:
    """The whole history, unchanged.

    .. versionadded:: 0.1.0
    """

    async def select(
        self, messages: Sequence[Message], /
    ) -> Result[tuple[Message, ...], HistoryError]:
        """Return *messages* as they are."""
        return Success(tuple(messages))


def _positive(
    what: str,
) -> Callable[[object, attrs.Attribute[int], int], None]:
    def check(_: object, __: attrs.Attribute[int], value: int) -> None:
        if value < 1:
            msg = f"{what} must be at least 1, got {value}"
            raise ConstructionError(msg)

    return check


@final
@attrs.frozen
class Window:
    """The preamble and the last *turns* turns (see :func:`window`).

    .. versionadded:: 0.1.0
    """

    turns: int = attrs.field(validator=_positive("window(turns)"))

    async def select(
        self, messages: Sequence[Message], /
    ) -> Result[tuple[Message, ...], HistoryError]:
        """Return the preamble and the last *turns* turns of *messages*."""
        shape = _shape(messages)
        if shape is None or len(shape.users) <= self.turns:
            return Success(tuple(messages))
        cut = shape.users[-self.turns]
        # The nearest safe cut at or after the natural one: fewer turns
        # rather than more, so the window is never exceeded.
        while not shape.safe(cut):
            cut += 1
        return Success(_view(messages, shape, cut))


@final
@attrs.frozen
class TokenBudget:
    """The preamble and the longest suffix within a token budget.

    See :func:`token_budget`.

    .. versionadded:: 0.1.0
    """

    max_tokens: int = attrs.field(
        validator=_positive("token_budget(max_tokens)")
    )
    count: Callable[[Message], int] = approximate_tokens

    async def select(
        self, messages: Sequence[Message], /
    ) -> Result[tuple[Message, ...], HistoryError]:
        """Return the longest view of *messages* within the budget."""
        shape = _shape(messages)
        if shape is None:
            return Success(tuple(messages))
        count, budget = self.count, self.max_tokens
        pinned = set(shape.pinned)
        total = sum(count(messages[i]) for i in range(shape.start))
        total += sum(count(messages[j]) for j in shape.pinned)
        # The smallest view: from the latest safe cut at or before the last
        # user message.  Counted from the end, so messages that will be
        # dropped anyway are never counted.
        minimal = shape.users[-1]
        while not shape.safe(minimal):
            minimal -= 1
        for i in range(len(messages) - 1, minimal - 1, -1):
            if i not in pinned:
                total += count(messages[i])
        if total > budget:
            return Failure(HistoryBudgetExceeded(total, budget))
        cut = minimal
        for i in range(minimal - 1, shape.start - 1, -1):
            if i not in pinned:
                total += count(messages[i])
                if total > budget:
                    break
            if shape.safe(i):
                cut = i
        return Success(_view(messages, shape, cut))


def _render(dropped: Sequence[Message]) -> str:
    """The dropped messages as text: ``role: content``, tool calls,
    images and files named."""
    names: dict[str, str] = {}
    lines: list[str] = []
    for m in dropped:
        who = m.role.value
        if m.role is Role.TOOL and m.tool_call_id is not None:
            tool = names.get(m.tool_call_id) or m.name
            who = f"{who} {tool}" if tool else who
        elif m.name:
            who = f"{who} ({m.name})"
        text = m.content
        for p in m.parts:  # what the summarizer cannot see, named
            if type(p) is not TextPart:
                text += (
                    f" [{type(p).__name__[:-4].lower()} {p.media_type or ''}]"
                )
        for call in m.tool_calls:
            names[call.id] = call.name
            text += f" [calls {call.name} {call.arguments}]"
        lines.append(f"{who}: {text.strip()}")
    return "\n".join(lines)


def _same(a: Message, b: Message) -> bool:
    return a is b or a == b


def _dropped(
    messages: Sequence[Message], kept: Sequence[Message], start: int
) -> tuple[list[Message], int]:
    """What *kept* dropped, and where its retained suffix starts in *kept*.

    The retained suffix is the longest common suffix of *messages* and
    *kept* after the preamble.  Between the preamble and that suffix,
    messages *kept* still holds (results pinned to the preamble) are
    matched in order; the others were dropped.
    """
    n, m = len(messages), len(kept)
    limit = min(n, m) - start
    s = 0
    while s < limit and _same(messages[n - 1 - s], kept[m - 1 - s]):
        s += 1
    middle = kept[start : m - s]
    dropped: list[Message] = []
    k = 0
    for i in range(start, n - s):
        if k < len(middle) and _same(messages[i], middle[k]):
            k += 1
        else:
            dropped.append(messages[i])
    return dropped, m - s


@final
@attrs.frozen
class Summarizing:
    """*keep*'s view, with what it dropped summarised by *model*.

    See :func:`summarizing`.

    .. versionadded:: 0.1.0
    """

    model: Model
    keep: HistoryPolicy
    fallback: HistoryPolicy | None = None
    instructions: str = DEFAULT_SUMMARY_INSTRUCTIONS

    async def select(
        self, messages: Sequence[Message], /
    ) -> Result[tuple[Message, ...], HistoryError]:
        """Return *keep*'s view with a summary of what it dropped."""
        start = _first_user(messages)
        if start is None:
            return Success(tuple(messages))
        result = await self.keep.select(messages)
        if not is_successful(result):
            return result
        kept = result.unwrap()
        dropped, suffix = _dropped(messages, kept, start)
        if not dropped:
            return Success(kept)
        request = ModelRequest(
            (
                Message.system(self.instructions),
                Message.user(_render(dropped)),
            )
        )
        answer = await generate(self.model, request)
        text = answer.map(lambda r: r.text.strip()).value_or("")
        if not text:
            # Graceful degradation: no summary is better than no view.
            if self.fallback is not None:
                return await self.fallback.select(messages)
            return Success(kept)
        summary = Message.system(SUMMARY_PREFIX + text)
        return Success((*kept[:suffix], summary, *kept[suffix:]))


def _first_user(messages: Sequence[Message]) -> int | None:
    for i, m in enumerate(messages):
        if m.role is Role.USER:
            return i
    return None


# -- factories ----------------------------------------------------------------


def full() -> HistoryPolicy:
    """Show the whole history, unchanged.

    The policy to name when an agent must see everything (and the natural
    *fallback* of :func:`summarizing`).

    .. versionadded:: 0.1.0
    """
    return Full()


def window(turns: int) -> HistoryPolicy:
    """Show the preamble and the last *turns* turns.

    A turn starts at a ``USER`` message, so the view holds at most *turns*
    user messages besides the preamble; with *turns* or fewer turns the
    history is shown unchanged.  When the natural cut (the *turns*-th last
    user message) would separate a tool call from its result, the cut moves
    later to the nearest safe point, so the window is never exceeded.

    Args:
        turns: how many turns to keep, at least 1.

    Raises:
        ConstructionError: *turns* is less than 1.

    .. versionadded:: 0.1.0
    """
    return Window(turns)


def token_budget(
    max_tokens: int, *, count: Callable[[Message], int] = approximate_tokens
) -> HistoryPolicy:
    """Show the preamble and the longest suffix that fits *max_tokens*.

    The view's messages, preamble included, sum to at most *max_tokens*
    by *count*.  The suffix starts at a safe cut (it never separates a tool
    call from its result) and always holds the last ``USER`` message and
    everything after it; when even that does not fit, the policy fails
    with :class:`~pipeline.failures.HistoryBudgetExceeded`.  *count* is
    called at most once per message, newest first, and never for messages
    older than the point where the budget runs out.

    Args:
        max_tokens: the budget, at least 1.
        count: the tokens of one message; :func:`approximate_tokens` by
            default.

    Raises:
        ConstructionError: *max_tokens* is less than 1.

    .. versionadded:: 0.1.0
    """
    return TokenBudget(max_tokens, count)


def summarizing(
    model: Model,
    *,
    keep: HistoryPolicy,
    fallback: HistoryPolicy | None = None,
    instructions: str = DEFAULT_SUMMARY_INSTRUCTIONS,
) -> HistoryPolicy:
    """Show *keep*'s view, with what it dropped summarised by *model*.

    When *keep* drops messages, *model* is asked (with *instructions* as
    the system prompt) to summarise them, and the view becomes the
    preamble, one system message ``"Summary of the earlier
    conversation:\\n" + summary``, then the rest of *keep*'s view.  When
    *keep* drops nothing the model is not called.  When the model fails or
    answers with empty text, the view is *fallback*'s, or *keep*'s own
    without a fallback: a failing summariser never fails the policy.  A
    failure of *keep* itself is returned as it is.

    Args:
        model: the model that writes the summary.
        keep: the policy choosing what is shown verbatim.
        fallback: the policy to use when no summary could be written.
        instructions: the summariser's system prompt.

    .. versionadded:: 0.1.0
    """
    return Summarizing(model, keep, fallback, instructions)
