"""KernelSVC: kernel feature maps (Nystroem landmarks, random Fourier features), the estimator and its model."""

from sparkml.runtime.compat import check_pyspark

check_pyspark()  # a clear error, naming the supported range, before the modules here import pyspark
