"""Whether an idle connection's socket has something to read, without
waiting: the server ended it (its goodbye, or the end of the stream, is
there) or sent what nobody asked for.  Either way the connection is not
fit for another command: the server stores drop such a one before reuse.
"""

from __future__ import annotations

import select


__all__ = ("readable",)

_poll = getattr(select, "poll", None)


def readable(fd: int) -> bool:
    """Whether the socket *fd* has bytes (or its end) to read now."""
    if _poll is None:  # Windows: select() takes any socket there
        return bool(select.select((fd,), (), (), 0)[0])
    poll = _poll()  # no descriptor limit (select's is 1024)
    poll.register(fd, select.POLLIN)
    return bool(poll.poll(0))
