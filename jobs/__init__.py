"""Batch entry points: parse a YAML config, call `sparkml`, write outputs. No ML logic here.

- `jobs.config`     load, override and validate a job config (before Spark starts)
- `jobs.datasets`   read parquet / csv / libsvm, assemble features, `generated:*` demo data
- `jobs.outputs`    all-or-nothing publishing of a run's outputs (local or Hadoop paths)
- `jobs.session`    reuse or start the Spark session; ship sparkml+gpu to remote executors
- `jobs.java_check` fail fast, with instructions, when no JDK is installed
- `jobs.tracking`   the job's MLflow run: params, metrics, config and outputs (mlflow, the `jobs` extra)
- `jobs.train`      `python -m sparkml.jobs.train --config conf/X.yaml` or `spark-submit jobs/train.py ...`
"""
