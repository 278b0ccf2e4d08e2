"""Differential: map_reduce on the lazy pool (one worker first, the rest once
it waits) against the eager pool (every worker at once), on items that
never wait, wait sometimes, fail, raise; fail_fast or not; nested.
Compares results and which items ran."""
import itertools, random
import anyio
from returns.result import Result, Success, Failure
from pipeline import handler
from pipeline import _concurrency as C
from pipeline._mapreduce import map_reduce

EAGER = False
orig_run_group = C._run_group
async def switched(tasks, body, *, lazy=False):
    return await orig_run_group(tasks, body, lazy=lazy and not EAGER)
C._run_group = switched

def make(n, waits, fails, raises, fail_fast, conc, nested):
    ran = []
    @handler
    async def work(i: int) -> Result[int, str]:
        ran.append(i)
        if i in waits:
            await anyio.sleep(0)
        if i in raises:
            raise KeyError("k")
        if i in fails:
            return Failure(f"f{i}")
        if nested:
            inner = await mr_inner(i)
            return inner
        return Success(i * 10)
    @handler
    async def leaf(j: int) -> Result[int, str]:
        if j % 2: await anyio.sleep(0)
        return Success(j)
    mr_inner = map_reduce(lambda i: list(range(i % 3 + 1)), leaf, lambda s, rs: Success(sum(r.unwrap() for r in rs)), max_concurrency=2)
    mr = map_reduce(lambda _: list(range(n)), work,
                    lambda s, rs: Success(tuple(repr(r) for r in rs)),
                    max_concurrency=conc, fail_fast=fail_fast)
    return mr, ran

async def once(args):
    mr, ran = make(*args)
    try:
        out = await mr(0)
        out = repr(out)
    except BaseException as e:
        out = f"raised {type(e).__name__}"
    return out, sorted(ran)

async def main():
    global EAGER
    rng = random.Random(8)
    diffs = 0
    for trial in range(300):
        n = rng.randint(0, 7)
        s = lambda p: frozenset(i for i in range(n) if rng.random() < p)
        args = (n, s(0.3), s(0.2), s(0.08), rng.random() < 0.5, rng.randint(1, 4), rng.random() < 0.3)
        EAGER = False; lazy = await once(args)
        EAGER = True; eager = await once(args)
        if lazy != eager:
            diffs += 1
            if diffs <= 5:
                print("DIFF", args); print("  lazy :", lazy); print("  eager:", eager)
    print("trials with a difference:", diffs, "of 300")

anyio.run(main)
