"""A native asyncio task cancelled twice while its SQLiteStore commit is in
flight goes on (raising) before its record is durable: the second
task.cancel() breaks through the anyio shield the first one raised.

Expected: the task stays pending until the writer finishes the write (or
SHIELD_BOUND passes).  The writer is held on a gate to keep the write in
flight deterministically (a slow disk, another process holding the lock)."""
import asyncio, os, sqlite3, tempfile, threading
from pipeline.stores import SQLiteStore
from pipeline.stores._protocol import Record
from pipeline.stores._sqlite import _Job

async def main():
    path = os.path.join(tempfile.mkdtemp(), "s.db")
    store = SQLiteStore(path)
    gate = threading.Event()
    orig = store._commit
    def held(*a):  # the blocker job (no args) holds the writer on the gate
        if not a[3:]:
            gate.wait()
            return None
        return orig(*a)
    store._commit = held
    store._jobs.put(_Job("commit", ()))
    task = asyncio.create_task(store.commit(Record("t", 0, None, b"{}", "x"), expected_head=None))
    await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.sleep(0.05)   # now in the shielded wait
    task.cancel()
    await asyncio.sleep(0.05)
    head = sqlite3.connect(path).execute(
        "SELECT MAX(version) FROM checkpoints WHERE thread_id='t'").fetchone()[0]
    print("caller went on:", task.done(), "| its record durable then:", head is not None)
    print("BROKEN" if task.done() and head is None else "OK")
    gate.set()
    try:
        await task
    except asyncio.CancelledError:
        pass
    await store.aclose()

asyncio.run(main())
