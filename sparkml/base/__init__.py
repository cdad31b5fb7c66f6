"""What every estimator and model of this library shares: the fit skeleton, Params, input checks,
persistence in MLlib's format, scoring, and the session kind."""

from sparkml.runtime.compat import check_pyspark

check_pyspark()  # a clear error, naming the supported range, before the modules here import pyspark
