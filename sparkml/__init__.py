"""Drop-in pyspark.ml linear models trained data-parallel on Spark with PyTorch kernels.

    from sparkml.classification import LogisticRegression, LinearSVC
    from sparkml.regression import LinearRegression
"""
__version__ = "0.1.0"
