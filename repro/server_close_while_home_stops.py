"""Variant: the home loop stops (run_until_complete returns) without being
closed.  Observed: aclose() hangs for ever, shielded (fail_after cannot end
it).  Close a server store from another thread's loop just as its home loop
(the asyncio loop it was opened on) ends: the home loop runs asyncio.run's
cleanup, which cancels the _close_home task aclose scheduled there.

Observed: aclose() raises concurrent.futures.CancelledError and the store's
own loop thread is never closed (its thread stays alive).  Expected: aclose
closes what it can (the store's thread at least) and returns, or raises a
typed error saying the home loop is gone."""
import asyncio, sys, threading
import anyio
from pipeline.stores.redis import RedisStore
from pipeline.stores.postgres import PostgresStore

KIND = sys.argv[1] if len(sys.argv) > 1 else "redis"
URL = {"redis": "redis://127.0.0.1:63888/0", "postgres": "postgresql://postgres@127.0.0.1:54388/postgres"}[KIND]
Store = {"redis": RedisStore, "postgres": PostgresStore}[KIND]

ready, go = threading.Event(), threading.Event()
box = {}

def home():
    async def main():
        store = Store(URL)
        await store.open()
        box["store"] = store
        ready.set()
        go.wait()   # the home loop is busy (blocked) while the other thread closes
    loop = asyncio.new_event_loop()
    loop.run_until_complete(main())  # the loop stops, is not closed (yet)
    box["loop"] = loop

a = threading.Thread(target=home); a.start()
ready.wait()
store = box["store"]
before = {t.name for t in threading.enumerate()}

async def closer():
    threading.Timer(0.3, go.set).start()   # the home loop ends after aclose asked it
    try:
        with anyio.fail_after(10):
            await store.aclose()
        print("aclose returned")
    except BaseException as e:
        print("aclose raised", type(e).__module__, type(e).__name__)

anyio.run(closer)
a.join()
left = [t.name for t in threading.enumerate() if t.name.startswith("pipeline")]
print("store threads still alive:", left)
print("BROKEN" if left else "OK")
