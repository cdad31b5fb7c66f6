"""What Spark's barrier check asks of the RDD a barrier stage reads, answered on the driver before the stage."""


def keeps_partitions(rdd):
    """Whether every RDD in ``rdd``'s stage (its narrow-dependency ancestors) has ``rdd``'s number of
    partitions: what Spark's barrier check (``DAGScheduler.checkBarrierStageWithRDDChainPattern``) asks."""
    n, todo, seen = rdd.getNumPartitions(), [rdd], set()
    while todo:
        deps = todo.pop().dependencies()
        for i in range(deps.size()):
            dep = deps.apply(i)
            if dep.getClass().getSimpleName() == "ShuffleDependency":  # the stage before this one
                continue
            parent = dep.rdd()
            if parent.id() not in seen:
                if parent.getNumPartitions() != n:
                    return False
                seen.add(parent.id())
                todo.append(parent)
    return True
