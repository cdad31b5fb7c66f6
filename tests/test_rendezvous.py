"""The ``allreduce`` rendezvous admits the fit's own tasks only (``sparkml.strategies.rendezvous``).

A stranger process (tests/support/rendezvous_stranger.py) connects to the driver's store during a fit,
reads every key and value it can list and tries to join the process group under the key spaces an
unsealed store would use: it must learn nothing (opaque keys, ciphertext, no address or host name)
and fail to join, and the fit must end with the same model as a fit nobody disturbed.
"""

import json
import os
import socket
import subprocess
import sys
import time
from datetime import timedelta

import numpy as np
import pytest
from support.data_helpers import linear_frame
from support.helpers import SUPPORT, coefficient_vector

from sparkml.classification import LogisticRegression
from sparkml.data import block_store
from sparkml.strategies import rendezvous

TIMEOUT = timedelta(seconds=10)


def test_sealed_values_round_trip_and_strangers_see_ciphertext():
    server = rendezvous.tcp_store("127.0.0.1", 0, 2, TIMEOUT, rendezvous.listen("127.0.0.1"))
    secret = rendezvous.new_secret()
    ours = rendezvous.sealed(rendezvous.tcp_store("127.0.0.1", server.port, 2, TIMEOUT), secret, "fit")
    ours.set("where/0", "host-a:/tmp/blocks")
    assert rendezvous.sealed(server, secret, "fit").get("where/0") == b"host-a:/tmp/blocks"
    assert ours.add("count", 2) == 2 and ours.add("count", 1) == 3

    ((key, _),) = [(k, v) for k, v in ((k, server.get(k)) for k in server.list_keys()) if len(v) > 8]
    assert len(key) == 64 and "where" not in key  # HMAC-SHA256 in hex
    assert b"host-a" not in server.get(key)
    other = rendezvous.sealed(server, rendezvous.new_secret(), "fit")  # another fit's secret
    assert not other.check(["where/0"])  # it names a different key: nothing to read
    assert not rendezvous.sealed(server, secret, "epoch-0").check(["where/0"])  # prefixes are separate


def test_compare_set_swaps_sealed_values():
    """NCCL's process group calls the store's compare_set: its c10d semantics through the seal."""
    server = rendezvous.tcp_store("127.0.0.1", 0, 2, TIMEOUT, rendezvous.listen("127.0.0.1"))
    ours = rendezvous.sealed(server, rendezvous.new_secret(), "fit")
    assert ours.compare_set("k", b"x", b"y") == b"x"  # absent, something expected: unchanged
    assert not ours.check(["k"])
    assert ours.compare_set("k", b"", b"first") == b"first"  # absent, nothing expected: set
    assert ours.compare_set("k", b"other", b"second") == b"first"  # a different value: unchanged
    assert ours.compare_set("k", b"first", b"second") == b"second" and ours.get("k") == b"second"
    assert b"second" not in server.get(ours._key("k"))  # still sealed


def test_a_written_or_replayed_value_is_refused():
    server = rendezvous.tcp_store("127.0.0.1", 0, 2, TIMEOUT, rendezvous.listen("127.0.0.1"))
    ours = rendezvous.sealed(server, rendezvous.new_secret(), "fit")
    ours.set("where/0", "a")
    ours.set("where/1", "b")
    keys = {k: server.get(k) for k in server.list_keys()}
    stranger_key = ours._key("where/0")
    server.set(stranger_key, b"\0" * 40)  # forged
    with pytest.raises(rendezvous.RendezvousTampered, match="'where/0'.*no rank of this fit wrote"):
        ours.get("where/0")
    server.set(stranger_key, keys[ours._key("where/1")])  # rank 1's genuine value, replayed under rank 0's key
    with pytest.raises(rendezvous.RendezvousTampered):
        ours.get("where/0")


def test_the_store_listens_on_one_interface():
    sock = rendezvous.listen("127.0.0.1")
    try:
        assert sock.getsockname()[0] == "127.0.0.1"
        outside = _non_loopback_address()
        if outside is None:
            pytest.skip("this machine has no non-loopback IPv4 address to try")
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((outside, sock.getsockname()[1]), timeout=2).close()
    finally:
        sock.close()


def _non_loopback_address():
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: only picks the outgoing interface
            address = s.getsockname()[0]
    except OSError:
        return None
    return None if address.startswith("127.") else address


@pytest.fixture(scope="module")
def frame(spark):
    df = linear_frame(spark, n=600, d=4, partitions=2, seed=11)
    yield df
    df.unpersist()


def _hold_until(path):
    """A per-iteration callback (it runs in rank 0's task, mid-fit) that holds the fit at its second
    iteration until ``path`` exists: the stranger has done all it can while the ranks wait."""

    def hold(iteration):
        deadline = time.time() + 120
        while iteration.iteration == 2 and not os.path.exists(path) and time.time() < deadline:
            time.sleep(0.05)

    return hold


def test_a_stranger_during_a_fit_learns_nothing_and_changes_nothing(frame, tmp_path, monkeypatch):
    address, out = tmp_path / "address", tmp_path / "stranger.json"

    def fit(disturbed=False):
        est = LogisticRegression(regParam=0.01, maxIter=25, tol=0.0, strategy="allreduce")
        if disturbed:
            est._add_iteration_callback(_hold_until(str(out)))
        return est.fit(frame)

    clean = fit()
    stranger = subprocess.Popen(
        [sys.executable, os.path.join(SUPPORT, "rendezvous_stranger.py"), str(address), str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    real_tcp_store = rendezvous.tcp_store

    def announce(host, port, world, timeout, listening=None):  # the driver's store: tell the stranger where
        store = real_tcp_store(host, port, world, timeout, listening)
        if listening is not None:
            (tmp_path / "address.tmp").write_text(f"{host} {store.port}")
            os.replace(tmp_path / "address.tmp", address)
        return store

    monkeypatch.setattr(rendezvous, "tcp_store", announce)
    try:
        disturbed = fit(disturbed=True)
        log, _ = stranger.communicate(timeout=120)
    finally:
        stranger.kill()
    assert stranger.returncode == 0, log[-3000:]
    assert np.array_equal(coefficient_vector(disturbed), coefficient_vector(clean))
    assert disturbed.intercept == clean.intercept

    got = json.loads(out.read_text())
    assert len(got["keys"]) >= 3  # it was connected while the ranks met
    assert all(len(k) == 64 and set(k) <= set("0123456789abcdef") for k in got["keys"]), got["keys"]
    host = address.read_text().split()[0]
    plain = [
        host.encode(),
        socket.inet_aton(socket.gethostbyname(host)),
        socket.gethostname().encode(),
        block_store.store_key().encode(),
    ]
    for value in map(bytes.fromhex, got["values"].values()):
        assert not any(p in value for p in plain), value
    assert got["joins"] and not any(j == "joined" for j in got["joins"].values()), got["joins"]
    assert got["alive"] > len(got["keys"])  # the joins ran against the live store (their keys are there)


def test_the_process_group_keeps_its_sealed_store_alive():
    """NCCL first uses the store at the first collective, after the stage's code has dropped its own
    reference: the group must keep the store's Python half alive, or its methods are gone."""
    import gc

    import torch
    import torch.distributed as dist

    from sparkml.strategies.barrier_task import _ProcessGroup

    server = rendezvous.tcp_store("127.0.0.1", 0, 1, TIMEOUT, rendezvous.listen("127.0.0.1"))
    group = _ProcessGroup(torch.device("cpu"), 0, 1, rendezvous.sealed(server, rendezvous.new_secret(), "fit"))
    try:
        gc.collect()
        default_store = dist.distributed_c10d._get_default_store()  # what NCCL reads and writes through
        default_store.set("late", "written after the group was made")
        assert default_store.get("late") == b"written after the group was made"
    finally:
        group.close()
