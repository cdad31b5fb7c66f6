# Two commands on a fresh machine: `make demo` and `make test` (Java 17+ must be installed).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-system test-full docs docs-serve lint test-compat compat-venvs test-compat-run wheel-demo dist bench clean java

$(STAMP): pyproject.toml constraints.txt
	@$(MAKE) --no-print-directory java
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e ".[spark,test,plot,jobs,docs,lint]"
	@touch $(STAMP)

java:
	@command -v java >/dev/null 2>&1 || [ -x "$$JAVA_HOME/bin/java" ] || { \
	  echo "Java 17 (or 21) is required by Spark and was not found: install a JDK" \
	       "(e.g. apt-get install openjdk-17-jre-headless) and set JAVA_HOME"; exit 2; }

# Train LogisticRegression on generated data in local Spark; prints metrics and the model path.
demo: $(STAMP)
	$(VENV)/bin/sparkml-train --config conf/logistic_demo.yaml

# The tiers (CONTRIBUTING.md): `make test` is every module's contract in this process's one local[2] session (the
# covering subset of the parity grid); `make test-system` the proofs that start Spark applications, servers or
# builds of their own (local-cluster, spark-submit, kills, Spark Connect, MLflow servers, the notebook, the
# wheel); `make test-full` both, plus what is marked full: the exhaustive grids, the repeats of a claim on more
# estimators or strategies, and the packed environment shipped with spark.archives.
# TEST_WORKERS: the fast tier's worker processes (pytest-xdist, whole modules to each, every worker its own local[2]
# session): a fit leaves a core idle while it waits on the JVM, which the other worker fills. 0: one process.
TEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --durations=30 tests

# SPARKML_TEST_BACKGROUND_RUNS: the system tier's background runs at once (tests/support/background.py; 2 here:
# 592 s against 666 s one at a time, on 2 cores; CI, whose fast tier runs beside it, sets 1).
test-system: $(STAMP)
	SPARKML_TEST_BACKGROUND_RUNS=$${SPARKML_TEST_BACKGROUND_RUNS:-2} $(PY) -m pytest -q -p no:cacheprovider --durations=15 -m "system and not full" tests

test-full: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -m "" tests

# The documentation site: docs/ and mkdocs.yml into site/ (strict: a broken link or reference fails the build);
# docs-serve browses it at http://127.0.0.1:8000 with live reload.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

# Style, formatting, types and the package's floors (pyproject.toml: [tool.ruff], [tool.mypy], [tool.importlinter]).
# The types and the import contracts are checked on this checkout: sparkml/gpu and sparkml/jobs link to gpu/ and
# jobs/ (ruff does not follow the links, so it reads each file once, under gpu/ and jobs/).
LINT_PATHS := sparkml gpu jobs tests benchmarks docs/hooks tools
lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/mypy --no-incremental
	PYTHONPATH=$(CURDIR) $(VENV)/bin/lint-imports --no-cache

# The wheel and the sdist, built from this checkout into dist/.
dist: $(STAMP)
	rm -rf dist
	$(PY) -m build --no-isolation --outdir dist . >/dev/null
	@ls dist

# The compatibility run: for each supported Spark line, a virtual environment with that pyspark and the built
# wheel (not this checkout); the tests marked `compat` on the lines `make test` does not run (COMPAT_PYSPARK),
# and on every line (WHEEL_PYSPARK) the example job from the installed wheel and the import-time version check.
COMPAT_PYSPARK ?= 3.5.9 4.0.5
WHEEL_PYSPARK ?= $(COMPAT_PYSPARK) 4.3.0
COMPAT_VENV = .venv-pyspark-$(1)

test-compat: dist
	@$(MAKE) --no-print-directory compat-venvs test-compat-run

compat-venvs:
	@for v in $(WHEEL_PYSPARK); do $(MAKE) --no-print-directory compat-venv-$$v || exit 1; done

test-compat-run:
	@for v in $(COMPAT_PYSPARK); do $(MAKE) --no-print-directory compat-run-$$v || exit 1; done
	@for v in $(WHEEL_PYSPARK); do $(MAKE) --no-print-directory wheel-demo PYTHON_BIN=$(CURDIR)/.venv-pyspark-$$v/bin \
	  || exit 1; done

# Each starts as a copy of make test's environment (torch and the rest as pinned, installed once: a fresh install
# of torch per line took most of the compatibility run's setup), then gets its pyspark and the built wheel in place
# of the checkout. Scripts are run as bin/python -m: the copied ones still name the original interpreter.
compat-venv-%: $(STAMP)
	rm -rf $(call COMPAT_VENV,$*)
	cp -a $(VENV) $(call COMPAT_VENV,$*)
	grep -v '^pyspark==' constraints.txt > $(call COMPAT_VENV,$*)/constraints.txt
	echo 'pyspark==$*' >> $(call COMPAT_VENV,$*)/constraints.txt
	$(call COMPAT_VENV,$*)/bin/python -m pip uninstall --quiet --yes sparkml-torch
	$(call COMPAT_VENV,$*)/bin/python -m pip install --quiet -c $(call COMPAT_VENV,$*)/constraints.txt \
	  "$$(ls dist/*.whl)[spark,connect,jobs,plot]" pytest hypothesis scikit-learn
	cd /tmp && $(CURDIR)/$(call COMPAT_VENV,$*)/bin/python -c "import pyspark, sparkml, sys; \
	  assert pyspark.__version__ == '$*' and sparkml.__file__.startswith(sys.prefix), sparkml.__file__"

# run from a scratch directory: Spark's Python workers start in the driver's working directory and would import
# sparkml from the checkout there
COMPAT_CWD := /tmp/sparkml-compat-run
compat-run-%:
	mkdir -p $(COMPAT_CWD)
	cd $(COMPAT_CWD) && SPARKML_TESTS_INSTALLED=1 $(CURDIR)/$(call COMPAT_VENV,$*)/bin/python -m pytest -q -p no:cacheprovider \
	  -W ignore::DeprecationWarning -m compat --durations=10 $(CURDIR)/tests

# The example job from an installed package (PYTHON_BIN: its venv's bin/): its console script and bundled config,
# run outside the checkout, end to end on each Spark line (the job's own tests run on 4.3 in make test); then the same package under a pyspark outside the supported range must refuse to import.
WHEEL_DEMO := /tmp/sparkml-wheel-demo
wheel-demo:
	rm -rf $(WHEEL_DEMO) && mkdir -p $(WHEEL_DEMO)/old/pyspark
	cd $(WHEEL_DEMO) && $(PYTHON_BIN)/python -c "import pyspark, sparkml; print('pyspark', pyspark.__version__, sparkml.__file__)"
	cd $(WHEEL_DEMO) && PATH=$(PYTHON_BIN):$$PATH $(PYTHON_BIN)/sparkml-train --config logistic_demo.yaml \
	  --set output.dir=$(WHEEL_DEMO)/model
	$(PYTHON_BIN)/python -c "import json; m = json.load(open('$(WHEEL_DEMO)/model/metrics.json'))['metrics']; \
	  assert m['areaUnderROC'] > 0.9 and m['accuracy'] > 0.8, m; print('held-out areaUnderROC', m['areaUnderROC'])"
	echo "__version__ = '3.4.1'" > $(WHEEL_DEMO)/old/pyspark/__init__.py
	cd $(WHEEL_DEMO) && ! PYTHONPATH=old $(PYTHON_BIN)/python -c "import sparkml.classification" 2> import-error.txt
	grep -q "supports pyspark >=3.5, <5.*3.4.1" $(WHEEL_DEMO)/import-error.txt && tail -1 $(WHEEL_DEMO)/import-error.txt

# Every results file the docs' performance page shows (benchmarks/results/*.json); about two and a half hours on 2 cores.
R := benchmarks/results
bench: $(STAMP)
	$(PY) benchmarks/bench_linear.py --repeats 3 --configs allreduce:float32,sync:float32
	$(PY) benchmarks/bench_linear.py --model svc --repeats 3 --configs allreduce:float32,sync:float32
	$(PY) benchmarks/bench_refit.py
	$(PY) benchmarks/bench_refit.py --rows 16000 --features 20 --out $(R)/refit_16k.json
	$(PY) benchmarks/bench_small.py
	$(PY) benchmarks/bench_worker_start.py
	$(PY) benchmarks/bench_transform.py --repeats 3
	$(PY) benchmarks/bench_cv.py
	$(PY) benchmarks/bench_cv.py --model svc
	$(PY) benchmarks/bench_cv.py --pipeline
	$(PY) benchmarks/bench_cv.py --num-bins 0
	$(PY) benchmarks/bench_cv.py --pipeline --num-bins 0
	$(PY) benchmarks/bench_glr.py
	$(PY) benchmarks/bench_glr_sparse.py
	$(PY) benchmarks/bench_kernel_svc.py --sizes 5000,100000 --landmarks auto --strategy auto
	$(PY) benchmarks/bench_kernel_svc.py --sizes 100000 --public-rows 142858 --real-rows 142858 --landmarks auto \
	  --strategy auto --no-bundled --out $(R)/kernel_svc_problems.json
	$(PY) benchmarks/bench_kernel_svc_probability.py
	$(PY) benchmarks/bench_sparse.py
	$(PY) benchmarks/bench_blocks.py --rows 250000 --features 100
	$(PY) benchmarks/bench_blocks.py --layout csr --rows 250000 --features 1048576 --out $(R)/blocks_csr.json
	$(PY) benchmarks/bench_executor_path.py --rows 1000000 --features 100 --kernel-rows 100000 --landmarks 500
	$(PY) benchmarks/bench_mixed.py
	$(PY) benchmarks/bench_mixed.py --rows 1000000 --users 100000 --out $(R)/mixed_1m.json
	$(PY) benchmarks/bench_mixed.py --quick --joint --out $(R)/mixed_joint.json
	$(PY) benchmarks/bench_mixed.py --rows 12500000 --users 1000000 --partitions 16 --driver-memory 12g \
	  --out $(R)/mixed_10m.json

clean:
	rm -rf $(VENV) .venv-pyspark-* runs build dist *.egg-info
