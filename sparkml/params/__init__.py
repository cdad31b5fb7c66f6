"""The Params' vocabulary, without pyspark or torch: each Param declared once (``declared.Declared``: name,
description, type converter, default, rule, type), and the lists each estimator has.

* ``declared``: the declaration and the tables read off a list of them (defaults, rules, converters);
* ``training``: the Params every estimator shares (MLlib's and this library's training Params), ``DEFAULTS``
  and ``RULES``;
* ``estimators``: the linear estimators' lists; ``kernel_svc``: KernelSVC's own Params and its list;
* ``rules``: what a value must satisfy; ``converters``: pyspark.ml's type converters mirrored, and this
  library's; ``mllib_structs``: MLlib's vectors and matrices as JSON and Parquet write them.

The pyspark Params, getters, setters, defaults and signatures are made from these (``sparkml.base.params``);
the saved-file reader takes their converters (``sparkml.saved.classes``); the strategies' options their
defaults (``sparkml.strategies.table``); the job config and the checkpoint their rules.
"""
