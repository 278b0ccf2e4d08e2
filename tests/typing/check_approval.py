"""Type-level contract of tool-call approval. Not executed."""

# pyright: reportUnnecessaryTypeIgnoreComment=error

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, assert_type

import attrs

from pipeline import Approve, Deny, RunContext, Tool, ToolApproval, tool
from pipeline.tools import ApprovingToolMaker, ToolMaker


@attrs.frozen
class Order:
    sku: str
    quantity: int


class Db:
    pass


def big(amount: int, note: str = "") -> bool:
    return amount > 100


def big_order(order: Order) -> bool:
    return order.quantity > 10


# approval=True (or False): the plain maker.
assert_type(tool(approval=True), ToolMaker)


@tool(approval=True)
async def deploy(service: str) -> str:
    """Deploy."""
    return service


as_tool: Tool[object] = deploy

# A predicate: the maker takes functions with the predicate's parameters.
maker: ApprovingToolMaker[[int, str]] = tool(approval=big)
other: ApprovingToolMaker[[str]] = tool(approval=big)  # type: ignore[arg-type]


@tool(approval=big)
async def refund(amount: int, note: str = "") -> str:
    """Refund."""
    return note * amount


# The predicate gets the decoded arguments, typed (an attrs instance here).
@tool(approval=big_order)
def place(order: Order) -> int:
    """Place an order."""
    return order.quantity


assert_type(place.fn(Order("a", 2)), int)


# After a RunContext, the parameters the model fills.
@tool(approval=big)
def refund_from(ctx: RunContext[Db], amount: int, note: str = "") -> str:
    """Refund from the database."""
    return note


assert_type(refund_from.fn(RunContext(Db()), 3), str)
needs_db: Tool[Db] = refund_from
not_other: Tool[int] = refund_from  # type: ignore[assignment]


# A lambda predicate: its parameters are taken as given.
@tool(approval=lambda amount: amount > 100)
async def pay(amount: int) -> str:
    """Pay."""
    return str(amount)


async def _direct() -> None:
    assert_type(await deploy.fn("api"), str)
    assert_type(await refund.fn(3), str)
    assert_type(await pay.fn(3), str)
    await refund.fn("3")  # type: ignore[arg-type]


# A predicate that does not fit the tool's parameters is a type error.
@tool(approval=big)  # type: ignore[arg-type]
async def wrong_type(amount: str, note: str = "") -> str:
    """Amount as text."""
    return amount


@tool(approval=big_order)  # type: ignore[arg-type]
async def wrong_arity(order: Order, rush: bool) -> str:
    """One argument more than the predicate takes."""
    return order.sku


# A predicate returns a bool; approval takes nothing else.
tool(approval="yes")  # type: ignore[call-overload]
tool(approval=lambda amount: "yes")  # type: ignore[arg-type, return-value]

# Answers: Approve (with edited arguments) or Deny (with a reason).
answers: list[ToolApproval] = [
    Approve(),
    Approve(arguments={"amount": 30}),
    Deny("too much"),
    Deny(reason="not now"),
]
assert_type(Approve().arguments, Mapping[str, Any] | None)
assert_type(Deny("x").reason, str)
Deny(3)  # type: ignore[arg-type]
Approve(arguments=[1])  # type: ignore[arg-type]
Approve(approved=False)  # type: ignore[arg-type]
Approve().arguments = None  # type: ignore[misc]
