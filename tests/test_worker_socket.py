"""The Python worker's socket to its JVM is set for request-and-reply traffic (``sparkml.runtime.worker_socket``):
Nagle's algorithm off, acknowledgements sent at once, so a task's input does not wait 40 ms for a delayed ACK."""

import socket
import sys

import pytest

from sparkml.runtime import worker_socket

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/fd")


def _loopback_pair():
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    accepted, _ = server.accept()
    return server, client, accepted


@linux_only
def test_loopback_tcp_sockets_get_nodelay_and_unix_sockets_are_left_alone():
    server, client, accepted = _loopback_pair()
    unix_a, unix_b = socket.socketpair(socket.AF_UNIX)
    try:
        for s in (client, accepted):
            assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
        assert worker_socket.acknowledge_promptly() >= 2
        for s in (client, accepted):
            assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        # the sockets still work, and their descriptors were not closed by the probing
        client.sendall(b"ping")
        assert accepted.recv(4) == b"ping"
        unix_a.sendall(b"x")
        assert unix_b.recv(1) == b"x"
    finally:
        for s in (server, client, accepted, unix_a, unix_b):
            s.close()


@linux_only
def test_a_spark_task_finds_its_socket_to_the_jvm(spark):
    """In a real Python worker the JVM's connection is found and set (0 here would mean the 40 ms per task is back)."""

    def probe(rows):
        for _ in rows:  # drain, so Spark may reuse the worker
            pass
        from sparkml.runtime import worker_socket as ws

        yield ws.acknowledge_promptly()

    found = spark.sparkContext.parallelize(range(2), 2).mapPartitions(probe).collect()
    assert len(found) == 2 and all(n >= 1 for n in found)
