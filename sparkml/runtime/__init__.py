"""The Spark runtime the library runs on, beneath everything that trains or scores.

* ``compat``: every difference between the supported Spark lines (3.5, 4.0, 4.1+), in one place;
* ``session_kind``: which kind of session a DataFrame belongs to (classic or Spark Connect), and how many tasks its
  cluster runs at once;
* ``task_context``: the running Spark task (partition, cores, GPUs, barrier peers), the one door from task-side
  code to pyspark;
* ``cancellation``: a fit the user cancelled (a notebook's Cancel, Ctrl-C, a Connect interrupt), told apart from a
  failure so that it is never retried;
* ``fault_injection``: the one test seam: a chosen task attempt failing, a straggler, a pause, each off unless the
  executors' environment switches it on.
"""
