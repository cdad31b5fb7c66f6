"""Driver side of the data path: convert a DataFrame once into executor-resident blocks.

``TrainingData.prepare`` runs one Spark job that converts every partition (see ``convert.py``),
reduces the per-partition statistics into a ``DatasetSummary`` (``statistics.py``) and checks the
generic input problems (``data.checks.check_conversion``: null, NaN or infinite values, ragged
vectors, negative weights, an empty dataset; a ``classWeight`` that names a label the data lacks, or whose
weights of 0 leave fewer than two classes). On any problem the blocks already written are
deleted and a ``ValueError`` naming the column is raised, so nothing is left behind and no
iteration has run. ``TrainingData`` owns the blocks' lifecycle: derive, barrier handles, release.
"""

import dataclasses
import json
import logging
import threading

import numpy as np

from sparkml.data import block_store, conversion_plan
from sparkml.data import class_weight as class_weights
from sparkml.data.checks import check_conversion, check_schema, invalid_sparse_message, jvm_invalid_sparse
from sparkml.data.convert import STATS_SCHEMA, handle_pairs, handle_rows, stats_batch
from sparkml.data.gram import gram_sums
from sparkml.data.statistics import PROBLEM_KEYS, label_histograms, summarize
from sparkml.runtime import worker_socket
from sparkml.runtime.barrier_lineage import keeps_partitions
from sparkml.runtime.session_kind import is_connect, is_stopped, task_slots

logger = logging.getLogger("sparkml")


class TrainingData:
    """A DataFrame converted once into blocks held on the executors, plus its summary."""

    def __init__(self, handles, dataset_id, summary, sparse, dtype, spark, compute_dtype=None):
        # handles: one row (partition, rows, info, moments) per partition; a cached RDD in a classic
        # session, a cached DataFrame in a Spark Connect session (no RDD API there)
        self.handles, self.dataset_id, self.summary = handles, dataset_id, summary
        # dtype: how the blocks are stored; compute_dtype: what the passes over them compute in
        self.sparse, self.dtype, self.spark = sparse, dtype, spark
        self.compute_dtype = compute_dtype or dtype
        self.connect = is_connect(spark)
        self.sc = None if self.connect else spark.sparkContext
        self.blocks = []  # (partition, rows, store key) of every non-empty partition
        self.n_partitions = 0  # of the handles (empty partitions included)
        self.dropped_by_tasks = False  # the last pass (allreduce) deleted the blocks itself
        self._checkpointed = None  # barrier_handles' copy of the handles, when one was needed
        self._broadcast = None  # what ``derive``'s tasks read (classic sessions), unpersisted by ``release``
        self._lock = threading.Lock()  # fits of one ``fitMultiple`` may share this data from several threads
        self.released = False
        self.source = None  # the DataFrame the blocks were converted from (``prepare``)
        self.barrier = False  # converted for a barrier stage (``prepare(barrier=True)``)
        self.strategy = None  # the strategy the fit converted for (``prepare(strategy=...)``)
        self.class_weights = None  # {label: weight} multiplied into the weights (``prepare(class_weight=...)``)
        self.nbytes = 0  # of the blocks on the executors (``prepare``)
        self.stored_rows = None  # ``derive`` with a kernel plan: the rows whose kernel block is stored
        self.columns = ("features", "label", None)  # the names ``prepare`` read: features, label, weight
        self.invalid_folds = 0  # ``prepare(fold=...)``: rows whose fold id names no fold
        self.gram = None  # ``prepare(gram=...)``: (A, b, sum w' z^2), the rows' Gram sums (``data.gram``)
        self.stored = True  # whether the conversion may have written blocks (not when it computed ``gram``)

    @classmethod
    def prepare(
        cls,
        df,
        features_col,
        label_col,
        weight_col=None,
        dtype="float64",
        compute_dtype=None,
        max_partitions=None,
        barrier=False,
        strategy=None,
        class_weight=None,
        offset_col=None,
        fold=None,
        gram=None,
    ):
        """Convert ``df`` into blocks stored in ``dtype``, read by passes computing in ``compute_dtype``
        (default ``dtype``; float64 over float32 storage is exact arithmetic on the stored values).

        ``max_partitions``: write at most that many blocks, coalescing (no shuffle) the input's
        partitions. One block per task slot converts in one wave of tasks instead of several.
        ``barrier``: a barrier stage will run over the handles (``barrier_handles``). In a classic
        session they are then also a local checkpoint, made by the conversion job itself.
        ``strategy``: the strategy the fit decided on (``TorchEstimator._conversion``), recorded for the fit.
        ``class_weight``: the ``classWeight`` setting (``class_weights.conversion_key``), multiplied into the
        weights (``"balanced"`` counts the labels first, one Spark job).
        ``offset_col``: a column of per-row offsets (a GLM's ``offsetCol``), stored as one more feature after the
        vector's d (the summary then has d + 1 features, the offset's moments last); a null or NaN offset is a
        ValueError naming the column.
        ``fold``: a Column of each row's fold id (an integer; null or ``convert.INVALID_FOLD`` where the row names
        no fold), stored beside the rows for ``subset``; ``invalid_folds`` counts the rows of no fold.
        ``gram``: a ``data.gram.GramPlan``: with at most ``GRAM_MAX_FEATURES`` features the conversion computes
        the rows' Gram sums (``self.gram``: A, b, sum w' z^2), and stores the rows only where the plan needs them.
        Ignored with ``fold``.
        """
        weight_col = weight_col or None
        check_schema(df, features_col, label_col, weight_col, offset_col)
        source = df
        if max_partitions:  # fewer stay as they are (asking the count would plan an RDD of df: ~14 ms)
            df = df.coalesce(max_partitions)
        by_class = class_weights.resolve(class_weight, df, label_col)  # "balanced": a job counting the labels
        columns = conversion_plan.Columns(features_col, label_col, weight_col, offset_col, fold, dtype, by_class)
        planned = conversion_plan.layout_and_plan(df, columns, gram, one_block=max_partitions == 1)
        sparse, gram, dataset_id = planned.sparse, planned.gram, planned.dataset_id
        converted, handles, spark = planned.converted, planned.handles, df.sparkSession
        if barrier and handles is not None and not is_connect(spark):
            handles.localCheckpoint()  # written by the collect below, beside the cached copy
        data = cls(handles, dataset_id, None, sparse, dtype, spark, compute_dtype)
        data.source, data.barrier, data.strategy = source, barrier, strategy
        data.class_weights = by_class
        data.columns = (features_col, label_col, weight_col)
        try:
            rows = [tuple(r) for r in converted.collect()] if handles is None else handles.collect()
        except Exception as e:
            # the conversion job failed: the partitions that did convert have written blocks
            data.release(best_effort=True)
            invalid = jvm_invalid_sparse(e) if sparse is False else None
            if invalid:  # vector_to_array met a sparse vector that MLlib refuses
                raise ValueError(invalid_sparse_message(features_col, "one of its vectors", invalid)) from e
            raise
        try:
            infos = [json.loads(r[2]) for r in rows]
            if sparse is None:  # the one partition's first vector chose the path, and whether d allows the Gram sums
                sparse = data.sparse = any(i.get("sparse") for i in infos)
                gram = gram if any(i.get("gram") for i in infos) else None
            check_conversion(
                infos,
                PROBLEM_KEYS,
                features_col,
                label_col,
                weight_col,
                (lambda: class_weights.check_labels(by_class, label_histograms(rows, infos), label_col))
                if by_class
                else None,
                offset_col=offset_col,
                dtype=dtype,
            )
            data.summary = summarize(rows, infos)
            stored = gram is None or gram.rows
            data.blocks = [(i["partition"], i["rows"], i["store"]) for i in infos if i["rows"]] if stored else []
            data.n_partitions = len(rows)
            data.nbytes = sum(i.get("bytes", 0) for i in infos)
            data.invalid_folds = sum(i.get("invalid_folds", 0) for i in infos)
            if gram:
                if not all(i.get("gram") for i in infos if i["rows"]):  # every partition has the first vector's d
                    raise RuntimeError("a partition of a Gram conversion computed no Gram sums")
                data.gram, data.stored = gram_sums(rows, infos, data.summary.n_features), stored
        except Exception:
            data.release()
            raise
        return data

    def subset(self, exclude_fold):
        """A new ``TrainingData`` of the rows whose fold id is not ``exclude_fold`` (converted with ``fold``):
        fold ``exclude_fold``'s training rows, in this data's partitions and order, with their own summary and
        the conversion's checks (an empty subset is refused as an empty dataset is). One Spark job copies them
        between files on the executors that hold the blocks (``sparkml.data.subset``); no row leaves the
        executor. Classic sessions. Release the subset before this data.
        """
        from sparkml.data.subset import subset_partition

        if self.connect:
            raise ValueError("TrainingData.subset runs in a classic session")
        source, target = self.dataset_id, block_store.new_dataset_id()

        def run(pairs):
            for partition, rows in pairs:
                n, info, moments = subset_partition(source, target, partition, rows, exclude_fold)
                yield partition, n, json.dumps(info), moments

        handles = self.handles.mapPartitions(lambda it: run(handle_pairs(it))).cache()
        data = TrainingData(handles, target, None, self.sparse, self.dtype, self.spark, self.compute_dtype)
        data.barrier, data.strategy, data.source = self.barrier, self.strategy, self.source
        data.columns = self.columns
        try:
            rows = handles.collect()
        except Exception:
            data.release(best_effort=True)
            raise
        try:
            infos = [json.loads(r[2]) for r in rows]
            check_conversion(infos, PROBLEM_KEYS, *self.columns, None)
            data.summary = summarize(rows, infos)
            data.blocks = [(i["partition"], i["rows"], i["store"]) for i in infos if i["rows"]]
            data.n_partitions = len(rows)
            data.nbytes = sum(i.get("bytes", 0) for i in infos)
        except Exception:
            data.release()
            raise
        return data

    def map_folds(self, fold, fn):
        """``fn(x, y, w)`` of each partition's rows whose fold id is ``fold`` (converted with ``fold``; ``x`` as
        ``sparkml.data.subset.fold_rows`` reads it), run where the blocks are; the list of what the calls
        return, partitions holding none of those rows skipped. One Spark job; no row leaves the executor but
        what ``fn`` returns. Classic sessions."""
        from sparkml.data.subset import fold_rows

        if self.connect:
            raise ValueError("TrainingData.map_folds runs in a classic session")
        source = self.dataset_id

        def run(pairs):
            for partition, rows in pairs:
                rows_of_fold = fold_rows(source, partition, rows, fold)
                if rows_of_fold is not None:
                    yield fn(*rows_of_fold)

        return self.handles.mapPartitions(lambda it: run(handle_pairs(it))).collect()

    def barrier_handles(self):
        """The handles, as the input of a barrier stage that runs one task per partition where its blocks are.

        Spark refuses a barrier stage whose chain of narrow dependencies changes the number of
        partitions: the coalesce of ``prepare``, or a union or coalesce upstream. Then the stage
        runs over a local checkpoint of the handles, whose partitions stay on the executors that
        computed them: made by the conversion job (``prepare(barrier=True)``, classic sessions), or
        here by one small job. Spark Connect cannot inspect the chain:
        there it always makes one.
        """
        if not self.connect and keeps_partitions(self.handles._jrdd.rdd()):
            return self.handles
        with self._lock:
            if self._checkpointed is None:  # made once per fit, whatever number of stages read it
                if self.connect:
                    self._checkpointed = self.handles.localCheckpoint()
                else:
                    copy = self.handles.map(lambda row: row)
                    copy.cache()  # keeps PySpark from pipelining later maps past the checkpoint
                    copy.localCheckpoint()
                    copy.count()
                    self._checkpointed = copy
            return self._checkpointed

    def derive(self, features, device="cpu", chunk_rows=8192, right_factor=None, plan=None, by_label=False):
        """A new ``TrainingData`` over the same rows whose features are ``features(rows)``, times
        ``right_factor`` when given.

        ``features`` maps a dense (k, d) tensor of rows to a (k, m) tensor (a kernel feature map).
        One Spark job computes it for every partition, on the executor that holds the partition's
        blocks, ``chunk_rows`` rows at a time, and writes the result as new dense blocks (labels
        and weights copied; ``sparkml.data.derive``). ``right_factor`` (m, r): stored beside each block and
        opened as ``sparkml.gpu.factored.FactoredBlock`` (features(rows) @ right_factor, never formed).
        ``plan`` (``derive.KernelPlan``, Nystroem): the rows whose kernel block does not fit their executor's
        budget are kept as rows, their kernel computed by every pass. In a classic session ``features``,
        ``right_factor`` and ``plan`` (the landmarks, the projection) reach the tasks as one broadcast, not
        inside each task. ``by_label``: each partition's rows are written in label order (``derive_partition``).
        The summary stays the input's. Release the derived data first.
        """
        from sparkml.data.derive import derive_partition, executor_shares

        source, target, dtype = self.dataset_id, block_store.new_dataset_id(), self.dtype
        if right_factor is not None:  # stored in the blocks' dtype: cast before it is shipped
            right_factor = np.ascontiguousarray(right_factor, dtype=np.float32 if dtype == "float32" else np.float64)
        if plan is not None and not plan.shares:
            plan = dataclasses.replace(plan, shares=executor_shares(self.blocks))
        # Spark Connect has no broadcast: there they travel in the tasks' closure
        shipped = (features, right_factor, plan)
        broadcast = None if self.sc is None else self.sc.broadcast(shipped)
        inline = shipped if broadcast is None else None

        def run(pairs):
            import torch

            from sparkml.runtime import task_context

            payload = broadcast.value if broadcast is not None else inline
            assert payload is not None
            feats, right, kernel_plan = payload
            dev = torch.device(task_context.device(device).device)
            out = []
            for partition, rows in pairs:
                stored = 0
                if rows:
                    stored = derive_partition(
                        source, target, partition, dev, dtype, feats, right, kernel_plan, chunk_rows, by_label
                    )
                info = {"store": block_store.store_key(), "stored": stored}
                out.append((partition, rows, json.dumps(info), b""))
            return out

        def run_arrow(batches):
            worker_socket.acknowledge_promptly()
            for row in run(handle_rows(batches)):
                yield stats_batch(*row)

        if self.connect:
            handles = self.handles.mapInArrow(run_arrow, STATS_SCHEMA).cache()
        else:
            handles = self.handles.mapPartitions(lambda it: run(handle_pairs(it))).cache()
        derived = TrainingData(handles, target, self.summary, False, dtype, self.spark)
        derived.barrier, derived.strategy = self.barrier, self.strategy
        derived._broadcast = broadcast  # a recomputed handle reads it: kept until ``release``
        try:
            rows = handles.collect()
        except Exception:
            derived.release(best_effort=True)
            raise
        infos = [json.loads(r[2]) for r in rows]
        derived.blocks = [(r[0], r[1], i["store"]) for r, i in zip(rows, infos) if r[1]]
        derived.n_partitions = len(rows)
        derived.stored_rows = sum(i["stored"] for i in infos)
        return derived

    def release(self, best_effort=False):
        """Delete the blocks on every executor that holds some, and drop the cached handles.

        After a fit the drop job runs over the cached handles, so each task runs where its
        partition's blocks are. ``best_effort``: after a failed conversion job. Its handles are
        not all cached, and recomputing them would rerun the failing conversion (the job could
        even fail before a drop task started), so the drop runs instead as a job of its own, one
        task per task slot, on no input; its failure is ignored. Either drop leaves a tombstone
        that stops a killed conversion task's late commit (``block_store.drop``). A second call
        does nothing.
        """
        dataset_id = self.dataset_id

        def drop(rows):
            worker_socket.acknowledge_promptly()
            block_store.drop(dataset_id)  # before the input: it may fail to compute
            try:
                for _ in rows:
                    pass
            finally:  # after: an evicted handle recomputed writes its block again, or fails half-way
                block_store.drop(dataset_id)
            return iter(())

        if self.released:  # a second call (KernelSVC releases its input early) must not recompute it
            return
        self.released = True

        def drop_on_task_slots():
            n = task_slots(self.spark) or 2
            self.spark.range(0, n, 1, n).mapInArrow(drop, STATS_SCHEMA).collect()

        try:
            if self.dropped_by_tasks or not self.stored:
                return
            if best_effort:
                drop_on_task_slots()
            elif self.connect:
                self.handles.mapInArrow(drop, STATS_SCHEMA).collect()
            else:
                self.handles.mapPartitions(drop).count()
        except Exception as e:
            if is_stopped(self.spark):  # the application's end deletes its executors' directories
                return
            if not best_effort:  # the handles are gone (a lost executor): drop where the tasks land
                logger.warning(
                    "the training blocks of dataset %s could not be dropped where they were "
                    "converted (%s); dropping them on every task slot instead",
                    dataset_id,
                    str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__,
                )
                try:
                    drop_on_task_slots()
                except Exception:
                    logger.warning("dropping the training blocks of dataset %s failed", dataset_id)
        finally:
            try:
                if self.handles is not None:  # None: a Gram conversion's were not cached
                    self.handles.unpersist(blocking=False)
                if self._checkpointed is not None:
                    self._checkpointed.unpersist(blocking=False)
                if self._broadcast is not None:
                    self._broadcast.unpersist(blocking=False)
            except Exception:  # a stopped session (a killed application): its cached data is gone with it
                if not is_stopped(self.spark):
                    logger.warning("the cached handles of dataset %s could not be unpersisted", dataset_id)
