"""The example projects (see each one's README.md).

In a checkout they are ``examples/``; the wheel ships them as
``pipeline.examples``: ``python -m pipeline.examples`` prints where they
are, so that you can run them from their directories or copy them.
"""
