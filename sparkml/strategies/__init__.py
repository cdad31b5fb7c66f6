"""How one evaluation of the data loss is distributed. ``sync``: one Spark job per evaluation."""
from sparkml.strategies.sync import SyncStrategy

__all__ = ["SyncStrategy", "make_strategy"]


def make_strategy(name, data, loss, device, aggregation_depth=2):
    if name == "sync":
        return SyncStrategy(data, loss, device, aggregation_depth)
    raise ValueError(f"strategy must be 'sync'; got {name!r}")
