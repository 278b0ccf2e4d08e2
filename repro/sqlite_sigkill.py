"""SIGKILL a process committing to a SQLiteStore from many tasks (some
cancelled, by anyio and natively) at random instants; then check: every
commit the child reported as returned Success is in the file, versions are
contiguous, every record's data is whole."""
import asyncio, hashlib, os, random, signal, sqlite3, subprocess, sys, tempfile, time

CHILD = r'''
import asyncio, hashlib, sys, random, anyio
from pipeline.stores import SQLiteStore
from pipeline.stores._protocol import Record
path, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
def data(t, v): return hashlib.sha256(f"{t}:{v}".encode()).hexdigest().encode() * 20
async def writer(store, t):
    head = await store.head(t)
    v = 0 if head is None else head + 1
    while True:
        try:
            if rng.random() < 0.2:
                with anyio.move_on_after(0):
                    r = await store.commit(Record(t, v, v - 1 if v else None, data(t, v), "c"), expected_head=v - 1 if v else None)
            else:
                r = await store.commit(Record(t, v, v - 1 if v else None, data(t, v), "c"), expected_head=v - 1 if v else None)
                if r.__class__.__name__ == "Success":
                    print(f"ok {t} {v}", flush=True)
        except asyncio.CancelledError:
            pass
        head = await store.head(t)
        v = 0 if head is None else head + 1
async def main():
    store = SQLiteStore(path)
    tasks = [asyncio.create_task(writer(store, f"t{i}")) for i in range(8)]
    while True:
        await asyncio.sleep(rng.random() / 100)
        rng.choice(tasks).cancel()
        for i, t in enumerate(tasks):
            if t.done():
                tasks[i] = asyncio.create_task(writer(store, f"t{i}"))
asyncio.run(main())
'''

def data(t, v): return hashlib.sha256(f"{t}:{v}".encode()).hexdigest().encode() * 20
problems = []
path = os.path.join(tempfile.mkdtemp(), "k.db")
rng = random.Random(8)
for trial in range(8):
    p = subprocess.Popen([sys.executable, "-c", CHILD, path, str(trial)], stdout=subprocess.PIPE, env={**os.environ})
    time.sleep(0.3 + rng.random() * 0.7)
    os.kill(p.pid, signal.SIGKILL)
    out = p.communicate()[0].decode().split("\n")
    oks = [(l.split()[1], int(l.split()[2])) for l in out if l.startswith("ok ")]
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT thread_id, version, parent, data FROM checkpoints ORDER BY thread_id, version").fetchall()
    conn.close()
    have = {(t, v) for t, v, _, _ in rows}
    for t, v in oks:
        if (t, v) not in have:
            problems.append(("reported but absent", t, v))
    by = {}
    for t, v, par, d in rows:
        by.setdefault(t, []).append(v)
        if bytes(d) != data(t, v):
            problems.append(("half or wrong data", t, v))
        if par != (v - 1 if v else None):
            problems.append(("parent", t, v))
    for t, vs in by.items():
        if vs != list(range(len(vs))):
            problems.append(("gap", t))
    print(trial, "commits reported:", len(oks), "records:", len(rows), "problems:", problems[:3])
print("BROKEN" if problems else "OK")
