"""The linear models: LogisticRegression, LinearSVC, LinearRegression and their objective in MLlib's
parametrization."""

from sparkml.runtime.compat import check_pyspark

check_pyspark()  # a clear error, naming the supported range, before the modules here import pyspark
