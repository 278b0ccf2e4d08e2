"""One caller's unencodable thread id fails every commit that shares its
group-commit transaction (other callers, other threads) with its error."""
import asyncio, os, tempfile, threading
from pipeline.stores import SQLiteStore
from pipeline.stores._protocol import Record

async def main():
    d = tempfile.mkdtemp()
    store = SQLiteStore(os.path.join(d, "s.db"))
    gate = threading.Event()
    orig = store._commit
    def slow(*a):
        if not a[3:]:
            gate.wait(); return None
        return orig(*a)
    store._commit = slow
    from pipeline.stores._sqlite import _Job
    store._jobs.put(_Job("commit", ()))   # hold the writer so both batch
    good = asyncio.create_task(store.commit(Record("good", 0, None, b"{}", "x"), expected_head=None))
    bad = asyncio.create_task(store.commit(Record("bad\ud800", 0, None, b"{}", "x"), expected_head=None))
    await asyncio.sleep(0.05)
    gate.set()
    for name, t in (("good", good), ("bad", bad)):
        try:
            print(name, "->", await t)
        except BaseException as e:
            print(name, "-> raised", type(e).__name__, str(e)[:80])
    print("good's head after:", await store.head("good"))
    await store.aclose()

asyncio.run(main())
