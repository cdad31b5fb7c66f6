"""Scoring fitted models, in one place.

* ``spec``: ``ScoringSpec``, the one frozen description of what a fitted model scores with, built by each model
  once (``scoringSpec()``) and by ``model_file`` from a saved model directory;
* ``kinds``: the output columns and the model kinds, declared once (``OUTPUTS``, ``KINDS``);
* ``batch``: what an executor runs on one Arrow batch (pyarrow, numpy and torch; no pyspark);
* ``stack``: k linear models scored in one matrix product (a param grid in one pass);
* ``dataframe``: the driver side of ``transform`` (the vectorized UDF, MLlib's errors, Spark's settings);
* ``model_file``: the spec of a saved model directory, without pyspark (``sparkml.serving``);
* ``mixed_file``: a saved mixed model's scorer, its tables read with pyarrow (``sparkml.serving``);
* ``input_rows``: serving's input rows and offsets, checked.

Nothing is imported here, so the executors' modules import without pyspark.
"""
