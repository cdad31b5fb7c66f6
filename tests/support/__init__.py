"""What the test modules share: data, references, model damages and the scripts that some tests run in a
subprocess (a separate driver, a Spark Connect server, a local-cluster or spark-submit). Imported as
``support.<module>`` (pytest puts tests/ on sys.path; a script run directly puts it there itself)."""
