"""Many callers on one SQLiteStore from three threads (asyncio, asyncio,
trio), each commit wrapped in asyncio.wait_for / anyio.move_on_after with
tiny timeouts, some tasks cancelled natively: when a commit call ends by
cancellation or timeout its record must already be durable or never be
(a later head shows whether it landed; versions stay contiguous); nobody
hangs."""
import asyncio, os, random, sqlite3, tempfile, threading
import anyio
from returns.result import Success
from pipeline.stores import SQLiteStore
from pipeline.stores._protocol import Record

path = os.path.join(tempfile.mkdtemp(), "w.db")
store = SQLiteStore(path)
problems = []

def durable(t, v):
    c = sqlite3.connect(path)
    try:
        return c.execute("SELECT 1 FROM checkpoints WHERE thread_id=? AND version=?", (t, v)).fetchone() is not None
    finally:
        c.close()

async def writer(t, rng, backend):
    v = 0
    for _ in range(40):
        r = Record(t, v, v - 1 if v else None, b"{}", "c")
        try:
            if backend == "asyncio" and rng.random() < 0.5:
                out = await asyncio.wait_for(store.commit(r, expected_head=v - 1 if v else None), rng.choice([0, 1e-6, 1e-4, 1e-3]))
            else:
                with anyio.move_on_after(rng.choice([0, 1e-6, 1e-4, 1e-3])):
                    out = await store.commit(r, expected_head=v - 1 if v else None)
                    if out == Success(None):
                        v += 1
                    continue
                # timed out: the record is durable or absent, and stays so
                landed = durable(t, v)
                if (await store.head(t)) != (v if landed else (v - 1 if v else None)):
                    problems.append((t, v, "head disagrees after a timeout"))
                if landed: v += 1
                continue
            if out == Success(None):
                v += 1
        except (asyncio.TimeoutError, TimeoutError):
            landed = durable(t, v)
            if (await store.head(t)) != (v if landed else (v - 1 if v else None)):
                problems.append((t, v, "head disagrees after wait_for"))
            if landed: v += 1

def thread(backend, seed):
    async def go():
        rng = random.Random(seed)
        async with anyio.create_task_group() as tg:
            for i in range(6):
                tg.start_soon(writer, f"{backend}{seed}-{i}", rng, backend)
    anyio.run(go, backend=backend)

ts = [threading.Thread(target=thread, args=a) for a in (("asyncio", 1), ("asyncio", 2), ("trio", 3))]
[t.start() for t in ts]
[t.join(120) for t in ts]
print("hung threads:", [t.name for t in ts if t.is_alive()])
c = sqlite3.connect(path)
for (t,) in c.execute("SELECT DISTINCT thread_id FROM checkpoints"):
    vs = [v for (v,) in c.execute("SELECT version FROM checkpoints WHERE thread_id=? ORDER BY version", (t,))]
    if vs != list(range(len(vs))): problems.append((t, "gap"))
print("problems:", problems[:5], len(problems))
