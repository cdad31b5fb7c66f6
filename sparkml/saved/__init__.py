"""Saved models as data: the files and the rules that read them, without pyspark (``sparkml.serving`` runs where
pyspark is not installed).

* ``model_files``: the one checked reader of a saved model's directory (metadata JSON, Parquet data, no pickles);
* ``classes``: what each model class saves (its Params, their types and choices, its data columns);
* ``mllib_structs``: MLlib's vector and matrix structs as they are written in JSON and Parquet;
* ``param_converters``: pyspark.ml's Param type converters mirrored without pyspark, plus this library's own,
  so a value is refused alike when set and when loaded.
"""
