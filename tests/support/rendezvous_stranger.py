"""A process on the network that is not part of a fit: it waits for the address of an ``allreduce``
rendezvous store (written to ``argv[1]`` by the test), connects while the fit runs, reads every key
and value it can, tries to join the process group as a rank, and writes what it got to ``argv[2]``
(JSON: the keys and hex values it read before trying to join, how each join ended, and how many
keys the store holds after them)."""

import json
import os
import sys
import time
from datetime import timedelta

import torch.distributed as dist
from torch.distributed import PrefixStore, TCPStore

address_file, out_file = sys.argv[1], sys.argv[2]
deadline = time.time() + 120
while not os.path.exists(address_file):
    if time.time() > deadline:
        sys.exit("no rendezvous address")
    time.sleep(0.02)
host, port = open(address_file).read().split()
store = TCPStore(host, int(port), None, False, timedelta(seconds=10))

seen = {}


def read_everything():
    for key in store.list_keys():
        seen[key] = store.get(key).hex()


for _ in range(20):  # while the ranks meet: everything a stranger can list and read
    read_everything()
    time.sleep(0.05)
joins = {}
for prefix in ("", "fit", "epoch-0"):  # the key spaces an unsealed store would use
    try:
        group_store = PrefixStore(prefix, store) if prefix else store
        dist.init_process_group("gloo", store=group_store, rank=1, world_size=2, timeout=timedelta(seconds=2))
        joins[prefix] = "joined"
        dist.destroy_process_group()
    except Exception as e:  # a timeout: no rank 0 ever answered under that key space
        joins[prefix] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
alive = len(store.list_keys())  # the store still serves the fit after the join attempts
json.dump({"keys": sorted(seen), "values": seen, "joins": joins, "alive": alive}, open(out_file + ".tmp", "w"))
os.replace(out_file + ".tmp", out_file)
