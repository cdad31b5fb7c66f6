"""Which kind of Spark session a DataFrame belongs to: classic (py4j, RDDs) or Spark Connect."""


def is_connect(obj):
    """True for a Spark Connect DataFrame or SparkSession (there is no SparkContext or RDD API)."""
    return type(obj).__module__.startswith("pyspark.sql.connect")
