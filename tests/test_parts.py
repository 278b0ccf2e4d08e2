"""Images and files in messages: the part types, their reprs, the codec."""

from __future__ import annotations

import base64
import hashlib
import inspect
import itertools
import json

from pathlib import Path
from typing import Any

import attrs
import cattrs
import pytest

from hypothesis import given, settings
from hypothesis import strategies as st
from returns.result import Result, Success

from pipeline import (
    Context,
    FilePart,
    ImagePart,
    Message,
    Part,
    Role,
    TextPart,
    fold,
    graph,
    handler,
    stores,
)
from pipeline._messages import built
from pipeline._serde import (
    BLOB_MIN,
    STRUCTURE_ERRORS,
    canonical,
    make_converter,
)
from pipeline.errors import InvalidPart
from pipeline.graph import END
from pipeline.history import (
    IMAGE_TOKENS,
    PDF_PAGE_TOKENS,
    approximate_tokens,
    part_tokens,
    summarizing,
    token_budget,
    window,
)
from pipeline.testing import Reply, ScriptedModel
from tests.strategies import parts


CONV = make_converter()
PNG = b"\x89PNG\r\n\x1a\n" + b"secret-pixels" * 10


# -- the types ---------------------------------------------------------------


def test_text_messages_are_as_before() -> None:
    """A text message has no parts and its content is the str it was."""
    m = Message.user("hi")
    assert m.content == "hi"
    assert m.parts == ()
    assert m == Message(Role.USER, "hi")
    assert Message.user(["hi"]) == m  # one text part is the text message


@given(st.lists(parts(), max_size=3), st.text(max_size=5))
@settings(max_examples=30)
def test_messages_built_without_converters_equal_constructed_ones(
    given_parts: list[Part], text: str
) -> None:
    """The fast builder (tool results, renamed replies) takes every field
    of a message, in order, and gives what the constructor gives."""
    names = [f.name for f in attrs.fields(Message)]
    assert list(inspect.signature(built).parameters) == names
    m = Message(Role.ASSISTANT, "", "n", (), None, None, "a", given_parts)
    again = built(*(getattr(m, name) for name in names))
    assert again == m
    assert repr(again) == repr(m)
    tool = Message.tool(text, tool_call_id="c1", name="t", agent="a")
    assert tool == Message(Role.TOOL, text, "t", (), "c1", None, "a")
    assert type(tool.role) is Role
    assert tool.parts == ()


def test_parts_keep_order_and_content_is_their_text() -> None:
    """content joins the text parts by newlines; parts keep every part."""
    img = ImagePart(data=PNG, media_type="image/png")
    m = Message.user(["Compare", img, TextPart("with"), img])
    assert m.content == "Compare\nwith"
    assert m.parts == (TextPart("Compare"), img, TextPart("with"), img)
    assert m.content.upper() == "COMPARE\nWITH"  # still a str


def test_content_given_with_parts_without_text_goes_first() -> None:
    """Message(role, "text", parts=(image,)): the text leads the parts."""
    img = ImagePart(url="https://example.com/a.png")
    m = Message(Role.USER, "describe", parts=(img,))
    assert m.parts == (TextPart("describe"), img)
    assert m.content == "describe"
    assert Message(Role.USER, "describe", parts=m.parts) == m


def test_content_must_match_the_text_parts() -> None:
    """Both given and different: an error naming the rule, not the text."""
    with pytest.raises(InvalidPart, match="content must be empty or the text"):
        Message(
            Role.USER,
            "other",
            parts=("mine", ImagePart(url="https://a.example/")),
        )


def test_evolve_keeps_the_invariant() -> None:
    """attrs.evolve of a message with parts re-checks it."""
    m = Message.user(["a", ImagePart(url="https://a.example/x")])
    assert attrs.evolve(m, name="bob").parts == m.parts
    with pytest.raises(InvalidPart):
        attrs.evolve(m, content="b")


def test_tool_results_may_carry_parts() -> None:
    """Message.tool takes parts (an image a tool made)."""
    img = ImagePart(data=PNG, media_type="image/png")
    m = Message.tool(["chart", img], tool_call_id="c1")
    assert m.role is Role.TOOL
    assert m.parts == (TextPart("chart"), img)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (ImagePart, "exactly one of data and url"),
        (
            lambda: ImagePart(
                data=b"x", url="https://a.example/", media_type="image/png"
            ),
            "exactly one of data and url",
        ),
        (lambda: ImagePart(data=b"x"), "media_type must be"),
        # It went to the provider as an empty data: URL / base64 source.
        (
            lambda: ImagePart(data=b"", media_type="image/png"),
            "ImagePart: data is empty",
        ),
        (
            lambda: ImagePart(data=bytearray(), media_type="image/png"),  # type: ignore[arg-type]
            "ImagePart: data is empty",
        ),
        (
            lambda: ImagePart(data=b"x", media_type="application/pdf"),
            "start with 'image/'",
        ),
        (
            lambda: ImagePart(data="x", media_type="image/png"),  # type: ignore[arg-type]
            "data must be bytes, got str",
        ),
        (
            lambda: ImagePart(url="ftp://a.example/secret"),
            "http:// or https://",
        ),
        (
            lambda: ImagePart(url="https://a.example/ spaced"),
            "http:// or https://",
        ),
        (lambda: FilePart(data=b"x", media_type="pdf"), "'type/subtype'"),
        (
            lambda: FilePart(data=b"x", media_type="text/plain", name=3),  # type: ignore[arg-type]
            "name must be a str",
        ),
        (lambda: TextPart(3), "text must be a str"),  # type: ignore[arg-type]
        (lambda: Message.user([3]), "part 0 must be"),  # type: ignore[list-item]
        (lambda: Message(Role.USER, parts="abc"), "not a string"),
    ],
)
def test_bad_parts_are_refused_clearly(make: object, message: str) -> None:
    """Each mistake is an InvalidPart naming the part and the rule."""
    with pytest.raises(InvalidPart, match=message) as caught:
        make()  # type: ignore[operator]
    assert "secret" not in str(caught.value)


def test_bytes_like_data_becomes_bytes() -> None:
    """bytearray and memoryview are copied to bytes (parts stay immutable)."""
    raw = bytearray(b"abc")
    p = FilePart(data=raw, media_type="text/plain")  # type: ignore[arg-type]
    raw[0] = 0
    assert p.data == b"abc"
    assert type(p.data) is bytes
    assert ImagePart(data=memoryview(b"ab"), media_type="image/gif").size == 2  # type: ignore[arg-type]


# -- reprs never show what a part holds ----------------------------------------


def test_reprs_show_size_and_media_type_only() -> None:
    """Bytes, file names, URL paths, queries and user info stay out."""
    img = ImagePart(data=PNG, media_type="image/png")
    assert (
        repr(img)
        == f"ImagePart(data=<{len(PNG)} bytes>, media_type='image/png')"
    )
    url = ImagePart(
        url="https://user:pw@Cdn.Example.com/private/k.png?sig=tok"
    )
    assert (
        repr(url)
        == "ImagePart(url=<https://cdn.example.com/...>, media_type=None)"
    )
    doc = FilePart(
        data=b"%PDF secret" * 1000,
        media_type="application/pdf",
        name="salary.pdf",
    )
    assert (
        repr(doc)
        == "FilePart(data=<11,000 bytes>, media_type='application/pdf')"
    )
    shown = repr(Message.user(["see", img, url, doc])) + str(
        Message.user(["see", doc])
    )
    for secret in ("secret", "salary", "private", "sig=tok", "pw", "user:"):
        assert secret not in shown


@given(st.lists(parts(), max_size=6), st.binary(min_size=8, max_size=40))
def test_no_repr_holds_the_bytes(ps: list[Part], marker: bytes) -> None:
    """Whatever the bytes, neither they nor their base64 reach a repr."""
    import base64  # noqa: PLC0415

    marked = [
        *ps,
        FilePart(data=marker, media_type="application/pdf", name="n.pdf"),
    ]
    shown = repr(Message.user(marked))
    assert repr(marker) not in shown
    assert base64.b64encode(marker).decode() not in shown
    assert "n.pdf" not in shown


# -- the codec -----------------------------------------------------------------


def _trip(m: Message) -> Message:
    data = canonical(CONV.unstructure(m))
    back = CONV.structure(json.loads(data), Message)
    assert canonical(CONV.unstructure(back)) == data
    return back


@given(st.lists(parts(), max_size=8), st.sampled_from(list(Role)))
def test_random_parts_round_trip_through_the_codec(
    ps: list[Part], role: Role
) -> None:
    """Any sequence of parts comes back equal, types and bytes alike."""
    m = Message(role, "", parts=ps)
    back = _trip(m)
    assert back == m
    assert [type(p) for p in back.parts] == [type(p) for p in m.parts]


def test_text_messages_encode_as_before() -> None:
    """No ``parts`` key for a text message: old records read the same."""
    doc = CONV.unstructure(Message.user("hi"))
    assert "parts" not in doc
    old: dict[str, object] = {
        "role": "user",
        "content": "hi",
        "name": None,
        "tool_calls": [],
        "tool_call_id": None,
        "usage": None,
    }
    assert CONV.structure(old, Message) == Message.user("hi")


@pytest.mark.parametrize(
    "part",
    [
        {"type": "video", "url": "https://a.example/"},
        {"type": "image", "media_type": "image/png", "data": "not base64!"},
        {"type": "image", "media_type": "image/png", "data": 3},
        {"type": "image", "url": "https://a.example/", "extra": 1},
        {"type": "file", "media_type": "application/pdf"},
        {
            "type": "file",
            "media_type": "application/pdf",
            "data": "",
            "name": 1,
        },
        {"type": "text", "text": 1},
        "text",
    ],
)
def test_bad_part_documents_are_refused(part: object) -> None:
    """A tampered record: a decode error, not a wrong part."""
    doc = {
        "role": "user",
        "content": "",
        "name": None,
        "tool_calls": [],
        "tool_call_id": None,
        "usage": None,
        "parts": [part],
    }
    with pytest.raises(STRUCTURE_ERRORS) as caught:
        CONV.structure(doc, Message)
    assert "secret" not in str(caught.value)


def test_content_that_disagrees_with_the_parts_is_refused() -> None:
    doc = CONV.unstructure(
        Message.user(["a", ImagePart(url="https://a.example/")])
    )
    doc["content"] = "b"
    with pytest.raises(STRUCTURE_ERRORS) as caught:
        CONV.structure(doc, Message)
    assert isinstance(caught.value, cattrs.ClassValidationError)
    assert "content must be empty" in repr(caught.value.exceptions)


@handler(name="look")
async def _look(c: Context) -> Result[Context, str]:
    return Success(
        c.append(Message.assistant(f"saw {len(c.messages[-1].parts)} parts"))
    )


async def test_parts_survive_a_sqlite_checkpoint(tmp_path: Path) -> None:
    """A graph's Context holding images and files, committed to a real
    SQLite file and loaded back: the same parts, bytes and all."""
    g = (
        graph.builder(Context)
        .node("look", _look)
        .entry("look")
        .edge("look", END)
        .build()
    )
    asked = Message.user(
        [
            "What is this?",
            ImagePart(data=PNG, media_type="image/png"),
            FilePart(
                data=b"%PDF-1.7 body",
                media_type="application/pdf",
                name="a.pdf",
            ),
            ImagePart(url="https://cdn.example/c.png", media_type="image/png"),
        ]
    )
    async with stores.SQLiteStore(tmp_path / "t.sqlite3") as store:
        done = (
            await g.run(Context.of(asked), store=store, thread_id="t")
        ).unwrap()
        assert done.state.messages[-1].content == "saw 4 parts"
        head = (await g.load(store, "t")).unwrap()
    assert head.state.messages[0] == asked
    assert head.state.messages[0].parts[1].data == PNG  # type: ignore[union-attr]


# -- history counts parts --------------------------------------------------------


def test_parts_count_towards_tokens() -> None:
    """An image counts IMAGE_TOKENS; a PDF by pages; text by characters,
    once (the text parts are the content)."""
    img = ImagePart(url="https://a.example/x.png")
    assert part_tokens(img) == IMAGE_TOKENS
    pdf = b"%PDF-1.7 /Type /Pages /Type /Page /Type/Page"
    assert (
        part_tokens(FilePart(data=pdf, media_type="application/pdf"))
        == 2 * PDF_PAGE_TOKENS
    )
    assert part_tokens(FilePart(data=b"x" * 400, media_type="text/csv")) == 100
    assert (
        part_tokens(FilePart(data=b"x" * 320, media_type="application/zip"))
        == 10
    )
    assert part_tokens(TextPart("x" * 40)) == 10
    text = approximate_tokens(Message.user("x" * 40))
    assert (
        approximate_tokens(Message.user(["x" * 40, img]))
        == text + IMAGE_TOKENS
    )


async def test_token_budget_drops_old_images_first() -> None:
    """A budget that holds one image keeps the newest turn with its image."""
    img = ImagePart(data=PNG, media_type="image/png")
    ms = [
        Message.system("s"),
        Message.user(["first", img]),
        Message.assistant("ok"),
        Message.user(["second", img]),
    ]
    view = (await token_budget(IMAGE_TOKENS + 50).select(ms)).unwrap()
    assert view[0] == ms[0]
    assert view[-1] == ms[-1]
    assert ms[1] not in view


# -- large parts are stored once per chain ---------------------------------------


def _snap(
    state: Context, version: int, parent: int | None
) -> fold.Snapshot[Context]:
    return fold.Snapshot(
        thread_id="t",
        version=version,
        parent=parent,
        state=state,
        node=None,
        next=("n",),
        join=None,
        step=version,
        fingerprint="f",
    )


BIG = ImagePart(data=bytes(range(256)) * 40, media_type="image/png")  # 10 KiB


def _chain(*states: Context) -> list[dict[str, Any]]:
    """Each state's document against the one before (root first)."""
    codec = fold.Codec(Context)
    docs = []
    parent = None
    for i, state in enumerate(states):
        snap = _snap(state, i + 1, i or None)
        sealed = codec.seal(snap, parent)
        assert isinstance(sealed, tuple), sealed
        docs.append(json.loads(sealed[1]))
        parent = snap
    return docs


def test_a_rewritten_history_does_not_copy_its_images() -> None:
    """A history rebuilt (not appended to) at each step still holds the
    image: the bytes are in the first record only, the others name them."""
    asked = Message.user(["look", BIG])
    states = [Context.of(asked, Message.assistant(f"v{i}")) for i in range(5)]
    docs = _chain(*states)
    sizes = [len(canonical(d)) for d in docs]
    assert sizes[0] > BIG.size
    assert all(size < 1000 for size in sizes[1:]), sizes
    assert list(docs[0]["blobs"]) == [
        hashlib.sha256(BIG.data or b"").hexdigest()
    ]
    assert all("blobs" not in d for d in docs[1:])
    back = fold.Codec(Context).rebuild(docs, "t", 5, 4).unwrap()
    assert back.state == states[-1]


def test_the_same_image_twice_in_a_record_is_stored_once() -> None:
    """Two messages holding equal bytes: one blob."""
    twice = Context.of(Message.user(["a", BIG]), Message.user(["b", BIG]))
    (doc,) = _chain(twice)
    assert len(doc["blobs"]) == 1
    assert canonical(doc).count(b'"blob"') == 2


def test_small_parts_stay_inline() -> None:
    """Below BLOB_MIN bytes a part is written where it stands."""
    small = ImagePart(data=b"x" * (BLOB_MIN - 1), media_type="image/png")
    (doc,) = _chain(Context.of(Message.user(["a", small])))
    assert "blobs" not in doc
    assert b'"data"' in canonical(doc)


def test_blobs_are_checked_against_their_hash() -> None:
    """A blob whose bytes are not its hash's, a blob missing from the
    chain, a malformed one: decode errors naming ``$.blobs`` or the part."""
    docs = _chain(Context.of(Message.user(["look", BIG])))
    codec = fold.Codec(Context)
    (sha,) = docs[0]["blobs"]
    forged = [{**docs[0], "blobs": {sha: base64.b64encode(b"other").decode()}}]
    error = codec.rebuild(forged, "t", 1, None).failure()
    assert (error.location, error.reason) == (
        "$.blobs",
        "a blob does not match its hash",
    )
    for bad in ({sha: 3}, {sha: "not base64!"}, ["x"]):
        error = codec.rebuild(
            [{**docs[0], "blobs": bad}], "t", 1, None
        ).failure()
        assert error.location == "$.blobs"
    missing = [{k: v for k, v in docs[0].items() if k != "blobs"}]
    error = codec.rebuild(missing, "t", 1, None).failure()
    assert error.location == "$.logs.messages"  # the message whose part it is


async def test_a_delta_applied_to_a_live_base_finds_its_blobs() -> None:
    """apply() (how a workflow engine advances a live snapshot) reads
    blobs the base's state holds."""
    first = Context.of(Message.user(["look", BIG]))
    second = Context.of(Message.user(["look", BIG]), Message.assistant("x"))
    codec = fold.Codec(Context)
    base = _snap(first, 1, None)
    delta = codec.document(_snap(second, 2, 1), base)
    assert "blobs" not in delta
    assert codec.apply(base, delta, 2, 1).unwrap().state == second


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(parts(max_bytes=3 * BLOB_MIN), max_size=4),
        min_size=1,
        max_size=4,
    )
)
def test_random_parts_round_trip_through_checkpoint_chains(
    turns: list[list[Part]],
) -> None:
    """Histories of random parts, each version rebuilt from the last's
    messages: the chain decodes to every state, and no blob is stored
    twice."""
    messages: list[Message] = []
    states = []
    for ps in turns:
        messages = (
            [*messages, Message.user(ps)]
            if len(messages) % 2
            else [Message.user(ps), *messages]
        )
        states.append(Context.of(*messages))
    docs = _chain(*states)
    codec = fold.Codec(Context)
    for i in range(len(docs)):
        assert (
            codec.rebuild(docs[: i + 1], "t", i + 1, i or None).unwrap().state
            == states[i]
        )
    stored = [sha for d in docs for sha in d.get("blobs", {})]
    assert len(stored) == len(set(stored))


async def test_sqlite_threads_store_rewritten_images_once(
    tmp_path: Path,
) -> None:
    """On a real SQLite store: ten versions of a rewritten history with a
    100 KiB image take about one image, and the thread loads back."""
    big = ImagePart(data=bytes(range(256)) * 400, media_type="image/jpeg")

    @handler(name="step")
    async def step(c: Context) -> Result[Context, str]:
        n = len(c.messages)
        return Success(Context.of(c.messages[0], Message.assistant(f"v{n}")))

    names = [f"n{i}" for i in range(10)]
    b = graph.builder(Context).node(names[0], step)
    for name in names[1:]:
        b = b.node(name, step)
    b = b.entry(names[0])
    for x, y in itertools.pairwise(names):
        b = b.edge(x, y)
    g = b.edge(names[-1], END).build()
    async with stores.SQLiteStore(tmp_path / "t.sqlite3") as store:
        await g.run(
            Context.of(Message.user(["look", big])), store=store, thread_id="t"
        )
        sizes = [len(r.data) for r in await store.records("t")]
        head = (await g.load(store, "t")).unwrap()
    assert sum(sizes) < 1.1 * max(sizes)
    assert head.state.messages[0].parts[1] == big


async def test_summaries_name_the_images_they_cannot_show() -> None:
    """A summarizing policy tells its model which images and files the
    dropped messages held (their kind and media type, not their bytes)."""
    model = ScriptedModel(Reply.text("They sent a chart."))
    pdf = FilePart(data=b"%PDF secret", media_type="application/pdf")
    ms = [
        Message.user(
            ["see", ImagePart(data=PNG, media_type="image/png"), pdf]
        ),
        Message.assistant("ok"),
        Message.user("and now?"),
    ]
    view = (await summarizing(model, keep=window(1)).select(ms)).unwrap()
    assert view[-1] == ms[-1]
    asked = model.requests[0].messages[-1].content
    assert "user: see [image image/png] [file application/pdf]" in asked
    assert "secret" not in asked
