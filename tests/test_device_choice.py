"""sparkml.gpu.choose_device: the device of one Spark task, a pure function of the ``device`` setting, the GPU
addresses Spark assigned to the task, its local rank in a barrier stage and what the process sees; and the
duplicate-device refusal that runs before a barrier stage's NCCL group forms. No Spark, no GPU needed."""

import pytest

from sparkml.gpu import DeviceChoice, check_distinct_devices, choose_device


def test_the_gpu_spark_assigned_is_the_tasks_device():
    assert choose_device("auto", gpu_addresses=["1"], cuda_count=4) == DeviceChoice(
        "cuda:1", "cuda:1", "1", "Spark assigned GPU 1"
    )
    assert choose_device("cuda", gpu_addresses=["3"], cuda_count=4).device == "cuda:3"
    # several GPUs per task: the first (the others are the task's to use; one device per task here)
    assert choose_device("auto", gpu_addresses=["2", "3"], cuda_count=4).device == "cuda:2"


def test_cuda_visible_devices_renumbers_the_addresses():
    # the executor sees GPUs 4 and 6 of the host as cuda:0 and cuda:1
    assert choose_device("auto", gpu_addresses=["6"], cuda_count=2, visible=["4", "6"]).device == "cuda:1"
    # a container that sees only its own GPU: whatever its host address, it is cuda:0
    assert choose_device("auto", gpu_addresses=["5"], cuda_count=1, visible=["GPU-7f3a"]).device == "cuda:0"
    with pytest.raises(ValueError, match="CUDA_VISIBLE_DEVICES=4,6 does not list it"):
        choose_device("auto", gpu_addresses=["5"], cuda_count=2, visible=["4", "6"])
    with pytest.raises(ValueError, match="no device index"):
        choose_device("auto", gpu_addresses=["GPU-7f3a"], cuda_count=2)
    with pytest.raises(ValueError, match="torch sees 2 CUDA device"):
        choose_device("auto", gpu_addresses=["2"], cuda_count=2)


def test_without_spark_gpus_a_barrier_task_takes_its_local_rank_modulo_the_devices():
    assert [choose_device("auto", local_rank=r, cuda_count=2).device for r in range(4)] == [
        "cuda:0",
        "cuda:1",
        "cuda:0",
        "cuda:1",
    ]
    assert choose_device("auto", cuda_count=2).device == "cuda:0"  # any other task: the first visible device


def test_an_explicit_setting_is_honoured():
    assert choose_device("cuda:1", gpu_addresses=["0"], cuda_count=2).device == "cuda:1"
    assert choose_device("cpu", gpu_addresses=["0"], cuda_count=2) == DeviceChoice("cpu", None, "0", "device='cpu'")
    with pytest.raises(RuntimeError, match="torch sees 1 CUDA device"):
        choose_device("cuda:1", cuda_count=1)
    with pytest.raises(ValueError, match="device='gpu' is not valid"):
        choose_device("gpu")


def test_without_cuda_auto_computes_the_choice_and_runs_on_the_cpu():
    choice = choose_device("auto", gpu_addresses=["1"], cuda_count=0)
    assert (choice.device, choice.gpu, choice.address) == ("cpu", "cuda:1", "1")
    assert "Spark assigned GPU 1" in choice.why and "torch sees no CUDA device" in choice.why
    assert choose_device("auto", local_rank=1, cuda_count=0) == DeviceChoice(
        "cpu", None, None, "no GPU assigned by Spark; torch sees no CUDA device: the CPU"
    )
    with pytest.raises(RuntimeError, match="device='cuda' was requested but torch sees no CUDA device"):
        choose_device("cuda", gpu_addresses=["1"], cuda_count=0)


def test_two_ranks_on_one_device_are_refused_before_the_group_forms():
    check_distinct_devices([("a", "cuda:0"), ("a", "cuda:1"), ("b", "cuda:0"), ("a", "cpu"), ("a", "cpu")])
    with pytest.raises(RuntimeError, match="barrier tasks 0 and 2 would both compute on cuda:1 of a"):
        check_distinct_devices([("a", "cuda:1"), ("b", "cuda:1"), ("a", "cuda:1")])


def test_a_tasks_device_choice_freezes_the_workers_imports(monkeypatch):
    """pyspark's daemon runs a full garbage collection after every task of a reused worker; once a task has asked
    for its device, the objects of torch and the library are frozen out of it (``task_context.freeze_imports``),
    and the driver's collector is left as it is."""
    import gc

    import torch  # noqa: F401

    from sparkml.runtime import task_context

    class Task:
        def partitionId(self):
            return 0

        def cpus(self):
            return 1

    gc.unfreeze()
    monkeypatch.setattr(task_context, "_frozen_at", 0)
    task_context.freeze_imports()
    assert gc.get_freeze_count() == 0  # not in a task: the driver
    try:
        with task_context.use(Task()):
            assert task_context.device("cpu").device == "cpu"
        frozen = gc.get_freeze_count()
        assert frozen > 50_000  # torch's objects alone are more
        assert len(gc.get_objects()) < frozen / 4
    finally:
        gc.unfreeze()
