"""Sphinx configuration: MyST Markdown, furo, intersphinx."""

project = "pipeline"
extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.intersphinx",
    "sphinx.ext.napoleon",
]
myst_enable_extensions = ["colon_fence"]
html_theme = "furo"
exclude_patterns = ["_build"]
intersphinx_mapping = {
    "python": ("https://docs.python.org/3", None),
    "returns": ("https://returns.readthedocs.io/en/latest", None),
    "anyio": ("https://anyio.readthedocs.io/en/stable", None),
    "attrs": ("https://www.attrs.org/en/stable", None),
}
