"""The proxy's open files against the process's limit (``ulimit -n``: 256 by default on macOS).

An open session holds :data:`FDS_PER_SESSION` descriptors, idle or not; at the default
``max_open`` of 256 that is over 1,000, and a proxy out of descriptors can neither open a session
(its requests pass through) nor accept the agent's connection. So ``toolbudget proxy`` raises its
soft limit to the hard one at startup (:func:`raise_fd_limit`), and the pool keeps no more
sessions open than the soft limit leaves room for beside :data:`FDS_RESERVED` descriptors for
everything else (:func:`open_sessions`): the least recently used idle ones are closed first and
reopened on demand, which costs a resume (a session resumes as it was).
"""

from __future__ import annotations

import resource
from typing import Final

__all__ = ["FDS_PER_SESSION", "FDS_RESERVED", "open_sessions", "raise_fd_limit"]

FDS_PER_SESSION: Final = 4
"""Descriptors an idle open session holds, measured (tests/proxy/test_proxy_fds.py): the session
directory, its lock file, its ``bodies/`` directory and its decision log. A request spilling
bodies holds a few more until their fsync, right after it is forwarded (``spill._deferred``)."""
FDS_RESERVED: Final = 128
"""Descriptors kept for everything but idle sessions: the listening socket, two sockets per
request in flight (the agent's, the upstream's) and httpx's pool of up to 64 kept-alive upstream
connections, the fsyncs deferred meanwhile, the interpreter's own files."""
_OPEN_MAX: Final = 10240
"""macOS refuses a soft limit above its per-process maximum (``kern.maxfilesperproc``, OPEN_MAX
in its headers), even under an unlimited hard limit: tried when the hard limit is refused."""


def raise_fd_limit() -> tuple[int, int]:
    """Raise the soft limit on open files as far as the hard one allows; the limits after, soft
    and hard (unchanged if neither the hard limit nor ``_OPEN_MAX`` could be set)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    infinite = resource.RLIM_INFINITY
    for target in (hard, _OPEN_MAX):
        if soft != infinite and (target == infinite or target > soft):
            if hard != infinite and target > hard:
                continue
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            except (ValueError, OSError):
                continue  # macOS: an unlimited soft limit, or one past kern.maxfilesperproc
            soft = target
            break
    return soft, hard


def open_sessions(max_open: int) -> tuple[int, int, int]:
    """The sessions to keep open at most (``max_open``, or fewer where the soft limit has no
    room for them: at least 1), with the soft and hard limits it was computed from."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return max_open, soft, hard
    room = (soft - FDS_RESERVED) // FDS_PER_SESSION
    return max(1, min(max_open, room)), soft, hard
