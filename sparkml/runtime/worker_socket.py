"""The Python worker's socket to its executor's JVM, set for request-and-reply traffic.

A Spark task in a Python worker is a short exchange over a local TCP socket: the JVM writes the task's
command, then its input rows; the worker writes its results, then an end marker. Neither side disables
Nagle's algorithm, and the receiving kernel delays its acknowledgement by up to 40 ms (Linux's delayed ACK),
so a second small write waits for the acknowledgement of the first: about 40 ms per task, longer than the
whole pass of a small fit (the same interaction py4j and Spark's own state server fixed with TCP_NODELAY).

``acknowledge_promptly`` is called by each task before it reads its input: it acknowledges what has
arrived at once (``TCP_QUICKACK``, which also sends an acknowledgement already pending) and sends this
side's writes without waiting (``TCP_NODELAY``). Only loopback TCP sockets are touched (the worker and its
JVM share a host); a Unix domain socket (``spark.python.unix.domain.socket.enabled``) has no such delay and
is left alone, as is everything where the options do not exist (macOS has no ``TCP_QUICKACK``).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import stat

_FD_DIR = "/proc/self/fd"


def _loopback_tcp_fds():
    """The descriptors of this process's TCP sockets whose peer is a loopback address."""
    try:
        names = os.listdir(_FD_DIR)
    except OSError:
        return
    for name in names:
        try:
            fd = int(name)
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            s = socket.socket(fileno=os.dup(fd))
        except (ValueError, OSError):
            continue
        try:
            if s.family in (socket.AF_INET, socket.AF_INET6) and s.type == socket.SOCK_STREAM:
                host = s.getpeername()[0]
                if ipaddress.ip_address(host.split("%")[0]).is_loopback:
                    yield s
        except (OSError, ValueError):
            pass
        finally:
            s.close()


def acknowledge_promptly() -> int:
    """Set ``TCP_QUICKACK`` and ``TCP_NODELAY`` on this worker's loopback TCP sockets; how many were set."""
    quickack = getattr(socket, "TCP_QUICKACK", None)
    done = 0
    for s in _loopback_tcp_fds():
        try:
            if quickack is not None:
                s.setsockopt(socket.IPPROTO_TCP, quickack, 1)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            done += 1
        except OSError:
            pass
    return done
