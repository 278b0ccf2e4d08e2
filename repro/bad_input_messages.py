"""Bad configuration values for this round's surfaces: is the error typed,
does it name what and where, does it echo the value?"""
import tempfile, os
from pipeline.graph import CachePolicy, GraphLimits
from pipeline._mapreduce import map_reduce
from pipeline.models import cached
from pipeline.stores import SQLiteStore
from pipeline.testing import ScriptedModel

SECRET = "SECRET-123"
cases = {
    "CachePolicy(ttl=-1)": lambda: CachePolicy(ttl=-1),
    "CachePolicy(ttl=nan)": lambda: CachePolicy(ttl=float("nan")),
    "CachePolicy(ttl=str)": lambda: CachePolicy(ttl=SECRET),
    "cached(ttl=-1)": lambda: cached(ScriptedModel(), ttl=-1),
    "cached(ttl=str)": lambda: cached(ScriptedModel(), ttl=SECRET),
    "GraphLimits(max_steps=str)": lambda: GraphLimits(max_steps=SECRET),
    "GraphLimits(concurrency=0)": lambda: GraphLimits(concurrency=0),
    "map_reduce(max_concurrency=0)": lambda: map_reduce(lambda s: [], None, None, max_concurrency=0),
    "map_reduce(max_concurrency=str)": lambda: map_reduce(lambda s: [], None, None, max_concurrency=SECRET),
    "SQLiteStore(synchronous=secret)": lambda: SQLiteStore(os.path.join(tempfile.mkdtemp(), "x.db"), synchronous=SECRET),
    "SQLiteStore(lease_ttl=-1)": lambda: SQLiteStore(os.path.join(tempfile.mkdtemp(), "x.db"), lease_ttl=-1),
}
for name, f in cases.items():
    try:
        f()
        print(f"{name:34} accepted")
    except Exception as e:
        msg = str(e)
        print(f"{name:34} {type(e).__name__:18} echo={'SECRET' in msg or '-1' in msg or 'nan' in msg} :: {msg[:90]}")
