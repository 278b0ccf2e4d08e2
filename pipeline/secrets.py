"""Secrets: values that show as a reference everywhere but where used.

>>> key = Secret("sk-canary", ref="openai-key")
>>> key
Secret(ref='openai-key')
>>> f"{key}"
"Secret(ref='openai-key')"
>>> key.reveal()
'sk-canary'

A :class:`Secret` prints, logs, traces and serialises as its *reference*;
only :meth:`~pipeline.Secret.reveal` gives the value.  A checkpoint stores
``{"$secret": "<ref>"}``; loading it asks the run's resolver (given to
:func:`pipeline.scope` as *secrets*) for the value behind the reference, so
a key never reaches a store and a resumed run still has it.  References
``env:NAME`` resolve from the environment without any setup.

A tool parameter whose type holds a ``Secret[...]`` (itself, or inside
``Optional``, a list, a mapping's values or an attrs class's fields) is a
secret argument: the tool receives a :class:`Secret` there, and the call as
recorded (in the conversation, checkpoints, events, spans and the next
request) holds ``{"$secret": "tool:<tool>.<name>"}`` in its place instead of
what the model sent.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import hmac
import json
import os
import traceback
import types
import typing

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Generic,
    NoReturn,
    SupportsIndex,
    TypeAlias,
    TypeVar,
    final,
    get_args,
    get_origin,
)

import attrs

from . import errors
from ._depth import loads
from ._moved import moved
from .errors import ConstructionError


T_co = TypeVar("T_co", covariant=True)

__all__ = (
    "BY_VALUE",
    "MARKER",
    "Resolver",
    "environment",
    "given_by_value",
    "holds_secret",
    "is_secret_type",
    "redact",
    "redacted_traceback",
    "resolve",
    "resolver",
    "reveal",
)

MARKER = "$secret"
"""The key of a secret's stored form, ``{"$secret": "<ref>"}``."""

Resolver: TypeAlias = Callable[[str], object]
"""Turns a reference into its value; raises :class:`LookupError` (a
``KeyError``, say) for a reference it does not know."""


_UNPICKLABLE = "a Secret cannot be pickled (store its reference instead)"


@final
class Secret(Generic[T_co]):
    """A value that shows as its reference *ref*; :meth:`reveal` gives it.

    Immutable; equal to another secret with the same reference and value;
    cannot be pickled.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_ref", "_value")

    _ref: str
    _value: T_co

    def __init__(self, value: T_co, *, ref: str) -> None:
        if not ref:
            msg = "Secret(ref=...): a reference must be a non-empty str"
            raise ConstructionError(msg)
        object.__setattr__(self, "_ref", ref)
        object.__setattr__(self, "_value", value)

    @staticmethod
    def env(name: str) -> Secret[str]:
        """The environment variable *name*, as ``Secret(ref="env:NAME")``.

        Raises:
            ConstructionError: the variable is not set.
        """
        value = os.environ.get(name)
        if value is None:
            msg = f"environment variable {name!r} is not set"
            raise ConstructionError(msg)
        return Secret(value, ref=f"env:{name}")

    @property
    def ref(self) -> str:
        """The reference, which is what prints, logs and is stored."""
        return self._ref

    def reveal(self) -> T_co:
        """The value itself.  Call it where the value is used, nowhere else."""
        return self._value

    def __setattr__(self, name: str, value: object) -> NoReturn:
        msg = "Secret is immutable"
        raise AttributeError(msg)

    def __repr__(self) -> str:
        return f"Secret(ref={self._ref!r})"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        if self._ref != other._ref:
            return False
        mine, theirs = self._value, other._value
        if isinstance(mine, (str, bytes)) and type(mine) is type(theirs):
            a = mine.encode() if isinstance(mine, str) else mine
            b = theirs.encode() if isinstance(theirs, str) else theirs
            return hmac.compare_digest(a, b)
        return bool(mine == theirs)

    def __hash__(self) -> int:
        return hash(("Secret", self._ref))

    def __reduce__(self) -> NoReturn:
        raise TypeError(_UNPICKLABLE)

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:
        raise TypeError(_UNPICKLABLE)

    def __getstate__(self) -> NoReturn:
        # object's own would hand over the slots, value included.
        raise TypeError(_UNPICKLABLE)

    def __copy__(self) -> Secret[T_co]:
        return self

    def __deepcopy__(self, memo: object) -> Secret[T_co]:
        return self


def reveal(value: str | Secret[str] | None) -> str | None:
    """*value* itself, or a :class:`Secret`'s value (for settings that take
    either).

    .. versionadded:: 0.1.0
    """
    return value.reveal() if isinstance(value, Secret) else value


def is_secret_type(t: object) -> bool:
    """Whether the annotation *t* is ``Secret`` or ``Secret[...]``.

    .. versionadded:: 0.1.0
    """
    return t is Secret or get_origin(t) is Secret


def environment(ref: str) -> object:
    """The default resolver: ``env:NAME`` from the environment.

    .. versionadded:: 0.1.0
    """
    if ref.startswith("env:"):
        value = os.environ.get(ref[4:])
        if value is not None:
            return value
    raise errors.SecretUnresolved(ref)


def resolver(
    values: Mapping[str, object] | None = None, *, env: bool = True
) -> Resolver:
    """A resolver from a mapping of references to values, falling back to
    the environment for ``env:`` references unless *env* is false.

    .. versionadded:: 0.1.0
    """
    known = dict(values or {})

    def resolve(ref: str) -> object:
        if ref in known:
            return known[ref]
        if env:
            return environment(ref)
        raise errors.SecretUnresolved(ref)

    return resolve


_RESOLVER: contextvars.ContextVar[Resolver] = contextvars.ContextVar(
    "pipeline_secret_resolver", default=environment
)


def resolve(ref: str) -> object:
    """The value behind *ref*, from the resolver in force (the innermost
    :func:`pipeline.scope` with *secrets*, else the environment).

    Raises:
        errors.SecretUnresolved: no resolver knows *ref*.

    .. versionadded:: 0.1.0
    """
    try:
        return _RESOLVER.get()(ref)
    except errors.SecretUnresolved:
        raise
    except LookupError:
        raise errors.SecretUnresolved(ref) from None


current_resolver: Callable[[], Resolver] = _RESOLVER.get
"""The resolver in force (read once per run by
:func:`pipeline.fold.ambient`)."""


def use_resolver(found: Resolver) -> contextvars.Token[Resolver]:
    """Make *found* the resolver in force (for :func:`pipeline.scope`)."""
    return _RESOLVER.set(found)


def reset_resolver(token: contextvars.Token[Resolver]) -> None:
    """Undo :func:`use_resolver`."""
    _RESOLVER.reset(token)


def stored(secret: Secret[Any]) -> dict[str, str]:
    """A secret's stored form."""
    return {MARKER: secret.ref}


@final
class _ByValue(str):
    """The reference of a secret given by value (its type tells it from
    any reference data could name)."""

    __slots__ = ()


BY_VALUE: Final[str] = _ByValue("argument")
"""The reference a secret given in the clear gets (a model's tool argument,
wrapped at once so that it travels on as a secret): see
:func:`given_by_value`."""


def given_by_value(value: object) -> str | None:
    """Where in *value* (a structured value: attrs instances, dataclasses,
    sequences (named tuples too), sets and mappings (typed dicts too), at
    any depth) a :class:`Secret` was given in the
    clear, as a path (``$.pin``, ``$[0].pin``); ``None`` if nowhere.  An
    answer or an input must carry its secrets as references: one given in
    the clear would be stored in the clear.

    .. versionadded:: 0.1.0
    """
    stack: list[tuple[object, str]] = [(value, "$")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, Secret):
            if type(item.ref) is _ByValue:
                return path
        elif isinstance(item, (str, bytes, int, float)) or item is None:
            continue
        elif attrs.has(cls := type(item)):
            stack.extend(
                (getattr(item, f.name), f"{path}.{f.name}")
                for f in attrs.fields(cls)
            )
        elif dataclasses.is_dataclass(item):
            stack.extend(
                (getattr(item, f.name), f"{path}.{f.name}")
                for f in dataclasses.fields(item)
            )
        elif isinstance(item, Mapping):
            stack.extend((k, f"{path}[…]") for k in item)  # pyright: ignore[reportUnknownVariableType]
            stack.extend((v, f"{path}[…]") for v in item.values())  # pyright: ignore[reportUnknownVariableType, reportUnknownMemberType]
        elif isinstance(item, (list, tuple, Sequence)):
            stack.extend(
                (v, f"{path}[{i}]")
                for i, v in enumerate(item)  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
            )
        elif isinstance(item, (set, frozenset, AbstractSet)):
            stack.extend((v, f"{path}[…]") for v in item)  # pyright: ignore[reportUnknownVariableType]
    return None


def holds_secret(t: object) -> bool:
    """Whether a :class:`Secret` appears anywhere in the annotation *t*:
    itself, in a union (``Secret[str] | None``), in a container's items or
    values, or in an attrs class's fields (at any depth).

    .. versionadded:: 0.1.0
    """
    try:
        return _holds_secret(t)
    except TypeError:  # an unhashable annotation: not remembered
        return _holds_secret.__wrapped__(t)


@functools.lru_cache(maxsize=1024)
def _holds_secret(t: object) -> bool:
    seen: set[int] = set()
    stack = [t]
    while stack:
        item = stack.pop()
        if is_secret_type(item):
            return True
        if id(item) in seen:
            continue
        seen.add(id(item))
        stack.extend(get_args(item))
        if isinstance(item, type) and attrs.has(item):
            stack.extend(_field_types(item).values())
    return False


def _field_types(cls: type) -> dict[str, object]:
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):  # an annotation that does not resolve
        hints = {}
    return {f.name: hints.get(f.name, f.type) for f in attrs.fields(cls)}


def redact(value: object, t: object, ref: str) -> object:
    """*value* (decoded JSON) with every part that *t* declares a
    :class:`Secret` replaced by ``{"$secret": ref}``.  Where the type does
    not say which part is which (a union of several kinds, a value of
    another shape than declared), the whole value is replaced: a secret
    is never kept by doubt.

    .. versionadded:: 0.1.0
    """
    try:
        return _redact(value, t, ref)
    except RecursionError:
        return {MARKER: ref}


def _redact(value: object, t: object, ref: str) -> object:
    if not holds_secret(t):
        return value
    hidden = {MARKER: ref}
    if is_secret_type(t):
        return hidden
    origin, args = get_origin(t), get_args(t)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        kinds = [a for a in args if a is not type(None)]
        return _redact(value, kinds[0], ref) if len(kinds) == 1 else hidden
    if isinstance(t, type) and attrs.has(t):
        if not isinstance(value, dict):
            return hidden
        fields = _field_types(t)
        return {
            k: _redact(v, fields[k], ref) if k in fields else v
            for k, v in value.items()
        }
    return _redact_items(value, origin, args, ref)


def _redact_items(
    value: object, origin: object, args: tuple[Any, ...], ref: str
) -> object:
    """A container's items or values (:func:`redact` of each)."""
    if isinstance(value, dict) and len(args) == 2:  # a mapping's values
        return {k: _redact(v, args[1], ref) for k, v in value.items()}
    if isinstance(value, list) and args:
        if origin is not tuple or args[-1] is Ellipsis:
            return [_redact(v, args[0], ref) for v in value]
        if len(value) == len(args):
            return [
                _redact(v, a, ref) for v, a in zip(value, args, strict=True)
            ]
    return {MARKER: ref}


def redact_arguments(
    tool: str,
    arguments: str,
    secret: Mapping[str, object],
    *,
    whole: bool = False,
) -> str:
    """A tool call's *arguments* (JSON) with the secrets in them replaced
    by references: *secret* maps each argument that may hold one to its
    type (see :func:`redact`).  Arguments that do not parse, or *whole*
    (the call does not decode: its secret may sit under a misspelt name),
    are replaced whole (they might hold a secret anyway)."""
    try:
        raw = (
            None
            if whole
            else loads(arguments or "{}", f"arguments for {tool!r}")
        )
    except ValueError:  # NestedTooDeeply included
        raw = None
    if not isinstance(raw, dict):
        return json.dumps({MARKER: f"tool:{tool}"})
    for name, kind in secret.items():
        if name in raw:
            raw[name] = redact(raw[name], kind, f"tool:{tool}.{name}")
    return json.dumps(raw, ensure_ascii=False, separators=(",", ":"))


def redacted_traceback(exc: BaseException) -> str:
    """*exc*'s traceback, and those of the exceptions that led to it, with
    every exception's message withheld: only types and frames (files,
    lines, functions, source lines), since a message may quote a secret
    (``int(pin.reveal())`` puts the PIN in its ``ValueError``).

    >>> pin = Secret("12x4", ref="pin")
    >>> try:
    ...     int(pin.reveal())
    ... except ValueError as exc:
    ...     text = redacted_traceback(exc)
    >>> "12x4" in text, text.splitlines()[-1]
    (False, 'ValueError (message withheld: it may hold a secret)')

    .. versionadded:: 0.1.0
    """
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or (
            None if current.__suppress_context__ else current.__context__
        )
    parts: list[str] = []
    for cause in reversed(chain):
        if parts:
            parts.append("\nwhich led to:\n\n")
        if cause.__traceback__ is not None:
            parts.append("Traceback (most recent call last):\n")
            parts.extend(traceback.format_tb(cause.__traceback__))
        parts.append(f"{_type_name(cause)} ")
        if isinstance(cause, BaseExceptionGroup):
            inner = ", ".join(_type_name(e) for e in cause.exceptions)
            parts.append(f"of {inner} ")
        parts.append("(message withheld: it may hold a secret)\n")
    return "".join(parts).rstrip("\n")


def _type_name(exc: BaseException) -> str:
    kind = type(exc)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


# Old paths of names that live elsewhere now; they warn.
_MOVED: dict[str, str] = {
    "SecretUnresolved": "pipeline.errors:SecretUnresolved",
}

if not TYPE_CHECKING:  # type checkers refuse the old paths
    __getattr__ = moved(__name__, _MOVED)
