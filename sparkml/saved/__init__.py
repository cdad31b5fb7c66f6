"""Saved models as data: the files and the rules that read them, without pyspark (``sparkml.serving`` runs where
pyspark is not installed).

* ``model_files``: the one checked reader of a saved model's directory (metadata JSON, Parquet data, no pickles);
* ``classes``: what each model class saves (its data columns and their shapes; its Params, read by the
  converters their declarations name: ``sparkml.params``).
"""
