"""The key-value store where the tasks of one barrier stage meet, closed to everyone else.

The ranks of an ``allreduce`` stage meet at a ``torch.distributed.TCPStore``: they publish where
they run and gloo (or NCCL) publishes the address of each rank's connections there. A TCPStore
has no authentication: anyone who reaches its port can list its keys, read and write values, and
register as a rank. So:

* **A per-fit secret.** ``new_secret()`` draws 32 random bytes on the driver (the Spark Connect
  client) for every barrier stage; it reaches the tasks inside the task closure, never through
  the store. ``SealedStore`` wraps the store so that each key is stored as
  HMAC-SHA256(secret, key) and each value as AES-256-GCM(secret, value) with the key as associated
  data. A process without the secret sees opaque names and ciphertext; it cannot find the keys the
  ranks wait on, so it cannot register as a rank, and a value it writes or replays fails
  authentication on the rank that reads it (``RendezvousTampered``, the fit fails; it never
  trains on it).
* **One interface.** ``listen`` binds the store's socket to the address the executors reach
  (``spark.driver.bindAddress`` or ``spark.driver.host``, as Spark binds its own driver; rank 0's
  task address in Spark Connect), not to every interface as TCPStore would by itself.

What stays open: the integer counters of ``add`` (a stranger can increment them, which can only
stall the rendezvous until its timeout), and the connections gloo then opens between ranks, which
carry the summed vectors unauthenticated and unencrypted, like Spark's own shuffle without
``spark.network.crypto.enabled``. The secret travels in the closure over Spark's RPC, which
``spark.authenticate`` authenticates and ``spark.network.crypto.enabled`` encrypts.
"""

import hashlib
import hmac
import os
import socket

SECRET_BYTES = 32
_NONCE_BYTES = 12


class RendezvousTampered(RuntimeError):
    """A value in the rendezvous store was not written by a rank of this fit."""


def new_secret():
    return os.urandom(SECRET_BYTES)


def listen(host):
    """A listening TCP socket on ``host``'s address (a free port), for ``TCPStore(master_listen_fd=)``."""
    family, kind, proto, _, address = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(address[:2] if family == socket.AF_INET else address)
    sock.listen(128)
    return sock


def tcp_store(host, port, world, timeout, listening=None):
    """A TCPStore client of ``(host, port)``, or its server on the socket ``listening`` (``listen``),
    which the store takes over: it closes the socket when it is destroyed."""
    from torch.distributed import TCPStore

    if listening is None:
        return TCPStore(host, port, world, False, timeout)
    port = listening.getsockname()[1]
    return TCPStore(host, port, None, True, timeout, wait_for_workers=False, master_listen_fd=listening.detach())


def sealed(store, secret, prefix=""):
    """``store`` seen through ``secret`` (module docstring); keys live under ``prefix``."""
    import torch.distributed as dist
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    class SealedStore(dist.Store):
        """Keys HMAC-SHA256'd and values AES-GCM-sealed with this fit's secret."""

        def __init__(self):
            super().__init__()
            self._aead = AESGCM(secret)

        def _key(self, key):
            return hmac.new(secret, f"{prefix}/{key}".encode(), hashlib.sha256).hexdigest()

        def _seal(self, key, value):
            nonce = os.urandom(_NONCE_BYTES)
            data = value.encode() if isinstance(value, str) else bytes(value)
            return nonce + self._aead.encrypt(nonce, data, f"{prefix}/{key}".encode())

        def _open(self, key, raw):
            from cryptography.exceptions import InvalidTag

            try:
                return self._aead.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], f"{prefix}/{key}".encode())
            except InvalidTag:
                raise RendezvousTampered(
                    f"the barrier stage's rendezvous store holds a value for {key!r} that no rank of this fit "
                    f"wrote (another process reached the store's port); the fit stops rather than use it"
                ) from None

        def set(self, key, value):
            store.set(self._key(key), self._seal(key, value))

        def get(self, key):
            return self._open(key, store.get(self._key(key)))

        def compare_set(self, key, expected, desired):
            """Set ``desired`` where the value is ``expected`` (absent: ``expected`` empty); the value after.
            NCCL's process group calls it. Sealed values differ at every write, so the swap is made on
            the stored ciphertext that decrypted to ``expected``: atomic as the store's own."""
            name, expected = self._key(key), bytes(expected)
            current = b""
            if store.check([name]):
                current = store.get(name)
                if self._open(key, current) != expected:
                    return self._open(key, current)
            elif expected:
                return expected
            sealed_desired = self._seal(key, desired)
            after = store.compare_set(name, current, sealed_desired)
            return bytes(desired) if after == sealed_desired else self._open(key, after)

        def add(self, key, amount):
            return store.add(self._key(key), amount)

        def wait(self, keys, timeout=None):
            keys = [self._key(k) for k in keys]
            return store.wait(keys) if timeout is None else store.wait(keys, timeout)

        def check(self, keys):
            return store.check([self._key(k) for k in keys])

        def delete_key(self, key):
            return store.delete_key(self._key(key))

        def num_keys(self):
            return store.num_keys()

        def set_timeout(self, timeout):
            store.set_timeout(timeout)

    return SealedStore()
