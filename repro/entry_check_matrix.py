"""The entry check (pipeline._concurrency.checkpoint_if_cancelled) against
anyio's own, in nested, shielded and deadline scopes, natively cancelled
tasks and cleanup code, on asyncio and trio; and composites (>>, &, |)
entered cancelled must run nothing."""
import asyncio, math
import anyio
from returns.result import Result, Success
from pipeline import handler
from pipeline._concurrency import checkpoint_if_cancelled

ran = []
@handler
async def a(x: int) -> Result[int, str]:
    ran.append("a"); return Success(x + 1)
@handler
async def b(x: int) -> Result[int, str]:
    ran.append("b"); return Success(x * 2)

async def raises(check):
    try:
        await check()
    except anyio.get_cancelled_exc_class():
        return True
    return False

SHAPES = {
    "none": [],
    "cancelled": [dict(cancel=True)],
    "cancelled>shield": [dict(cancel=True), dict(shield=True)],
    "shield>cancelled": [dict(shield=True), dict(cancel=True)],
    "cancelled>shield>plain": [dict(cancel=True), dict(shield=True), dict()],
    "cancelled>plain>plain": [dict(cancel=True), dict(), dict()],
    "deadline-past": [dict(deadline=-math.inf)],
    "deadline-past>shield": [dict(deadline=-math.inf), dict(shield=True)],
    "shield+deadline-past": [dict(shield=True, deadline=-math.inf)],
    "cancelled-shield": [dict(shield=True, cancel=True)],
}

async def one(shape, check):
    scopes = []
    async def inner(i):
        if i == len(shape):
            return await raises(check)
        spec = dict(shape[i])
        cancel = spec.pop("cancel", False)
        with anyio.CancelScope(**spec) as s:
            if cancel: s.cancel()
            r = await inner(i + 1)
        return r
    return await inner(0)

async def composite(shape, op):
    ran.clear()
    async def call():
        await op(1)
    async def chk():
        await call()
    try:
        await one(shape, chk)
    except Exception:
        pass
    return tuple(ran)

async def main():
    diffs = []
    for name, shape in SHAPES.items():
        mine = await one(shape, checkpoint_if_cancelled)
        theirs = await one(shape, anyio.lowlevel.checkpoint_if_cancelled)
        if mine != theirs:
            diffs.append((name, mine, theirs))
        for opname, op in (("a>>b", a >> b), ("a&b", a & b), ("a|b", a | b)):
            r = await composite(shape, op)
            if theirs and r:
                diffs.append((name, opname, "ran while cancelled", r))
    # cleanup code after a native cancellation was caught: must not raise again
    if anyio.get_current_task is not None:
        pass
    print(sniff(), "differences:", diffs)

def sniff():
    import sniffio
    return sniffio.current_async_library()

async def native():
    """asyncio: a task cancelled natively before it ran; and cleanup after."""
    out = {}
    async def pre():
        ran.clear()
        await (a >> b)(1)
    t = asyncio.get_running_loop().create_task(pre())
    t.cancel()
    try: await t
    except asyncio.CancelledError: pass
    out["pre-cancelled ran"] = tuple(ran)
    async def cleanup():
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            ran.clear()
            r = await (a >> b)(1)
            out["cleanup result"] = (repr(r), tuple(ran))
            raise
    t = asyncio.get_running_loop().create_task(cleanup())
    await asyncio.sleep(0); t.cancel()
    try: await t
    except asyncio.CancelledError: pass
    print("asyncio native:", out)

anyio.run(main, backend="asyncio")
anyio.run(main, backend="trio")
anyio.run(native, backend="asyncio")
