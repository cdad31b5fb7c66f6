"""GeneralizedLinearRegression: MLlib's GLM families and links, fitted by IRLS over executor-resident blocks."""

from sparkml.runtime.compat import check_pyspark

check_pyspark()  # a clear error, naming the supported range, before the modules here import pyspark
