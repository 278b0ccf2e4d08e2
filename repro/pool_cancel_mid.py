"""Cancel map_reduce / & fan-outs at every checkpoint index (anyio scope and
native task.cancel()), on asyncio and trio: no item may start after the
cancel, every started item must have ended, and the caller must see the
cancellation (no value returned to a cancelled caller)."""
import sys
import anyio, asyncio
from returns.result import Result, Success
from pipeline import handler
from pipeline._mapreduce import map_reduce

problems = []

def build(log):
    @handler
    async def work(i: int) -> Result[int, str]:
        log.append(("start", i))
        try:
            for _ in range(i % 3):
                await anyio.lowlevel.checkpoint()
            if i % 4 == 0:
                inner = await mr_inner(i)
                return inner
            return Success(i)
        finally:
            log.append(("end", i))
    @handler
    async def leaf(j: int) -> Result[int, str]:
        log.append(("start", 100 + j))
        try:
            await anyio.lowlevel.checkpoint()
            return Success(j)
        finally:
            log.append(("end", 100 + j))
    mr_inner = map_reduce(lambda i: list(range(3)), leaf, lambda s, rs: Success(0), max_concurrency=2)
    return map_reduce(lambda _: list(range(9)), work, lambda s, rs: Success(len(rs)), max_concurrency=3)

async def trial(k, native):
    log = []
    mr = build(log)
    cancelled_at = None
    result = "none"
    async def caller():
        nonlocal result
        try:
            result = repr(await mr(0))
        except BaseException as e:
            result = f"raised {type(e).__name__}"
            raise
    if native:
        task = asyncio.get_running_loop().create_task(caller())
        for _ in range(k):
            await asyncio.sleep(0)
        cancelled_at = len(log)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
    else:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(caller)
                for _ in range(k):
                    await anyio.lowlevel.checkpoint()
                cancelled_at = len(log)
                scope.cancel()
    started = {i for e, i in log if e == "start"}
    ended = {i for e, i in log if e == "end"}
    late = [i for e, i in log[cancelled_at:] if e == "start"]
    done_before = "none" != result and cancelled_at is not None
    if started != ended:
        problems.append((k, native, "unfinished", started - ended))
    if late:
        problems.append((k, native, "started after cancel", late))
    if result.startswith("<Success") and len([1 for e, _ in log[:cancelled_at] if e == "end"]) < len(started):
        problems.append((k, native, "value to cancelled caller", result))

async def main(backend):
    for k in range(0, 40):
        await trial(k, False)
        if backend == "asyncio":
            await trial(k, True)

for backend in ("asyncio", "trio"):
    problems.clear()
    anyio.run(main, backend, backend=backend)
    print(backend, "problems:", problems[:8], len(problems))
