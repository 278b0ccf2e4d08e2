"""Sphinx configuration: MyST Markdown, furo, intersphinx (online only)."""

import os
import sys


sys.path.insert(0, os.path.dirname(__file__))  # noqa: PTH120  # pictures.py

project = "pipeline"
extensions = [
    "pictures",  # the drawings and the live view, made at build time
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.intersphinx",
    "sphinx.ext.napoleon",
]
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3
# graph.Builder and swarm.Builder share a name: annotations say `Builder`.
suppress_warnings = ["ref.python"]
html_theme = "furo"
exclude_patterns = ["_build", "_pictures", "pictures.py"]
# Type hints point at the defining (private) modules and at third-party
# packages; offline builds cannot fetch those inventories.
nitpicky = True
nitpick_ignore_regex = [
    (
        r"py:.*",
        r"(returns|collections|typing|typing_extensions|anyio|attrs|pyrsistent|cattrs|types|hypothesis|tenacity|logging|psycopg|psycopg_pool|redis|openai|anthropic|opentelemetry|temporalio|datetime|pathlib|contextvars|random|mcp|mcp_types)(\..*)?",
    ),
    (
        r"py:.*",
        r"(MetaValue|MetaMerge|Metadata|Children|Calls|AgentError|Result|False|True|None|_\w+)",
    ),
    (r"py:.*", r"pipeline(\.\w+)*\._\w+"),
    (
        r"py:.*",
        r"pipeline\.(_\w+|models\._\w+|graph\._\w+|swarm\._\w+|fold\._\w+|testing\._\w+|temporal\._\w+)\..*",
    ),
    # Aliases and the machines' private value types.
    (
        r"py:.*",
        r"(Param|Observer|Gate|HandoffObserver|GraphMachine|SwarmMachine|Member|Intercept|Progress|Migration|EventSink|FoldEvent|Doc|Where|Reducer|Hooks|Journal|NestedJournal|MakeRunner|Offload|Resolver|Shaped|Writable|Ledger|Tracing|DeltaSink|ToolHook|TracerProvider|WorkflowHandle|SnapshotDoc|RunRequest|Waited|Kinds|Client|Worker|StdioServerParameters)",
    ),
    # Type variables and aliases, wherever they are defined.
    (
        r"py:.*",
        r"(pipeline(\.\w+)*\.)?([A-Z]|In|Out|Err|Nxt|Pre|Outs|Answer|Step|Sink|R|V|CE|Ex)\w{0,3}(_co|_contra)?",
    ),
]
autodoc_typehints = "description"
_ONLINE = os.environ.get("PIPELINE_DOCS_ONLINE") == "1"
intersphinx_mapping = (
    {}
    if not _ONLINE
    else {
        "python": ("https://docs.python.org/3", None),
        "returns": ("https://returns.readthedocs.io/en/latest", None),
        "anyio": ("https://anyio.readthedocs.io/en/stable", None),
        "attrs": ("https://www.attrs.org/en/stable", None),
    }
)
