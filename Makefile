# Two commands on a fresh machine: `make demo` and `make test` (Java 17+ must be installed).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-full bench clean java

$(STAMP): pyproject.toml constraints.txt
	@$(MAKE) --no-print-directory java
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e ".[test,plot,jobs]"
	@touch $(STAMP)

java:
	@command -v java >/dev/null 2>&1 || [ -x "$$JAVA_HOME/bin/java" ] || { \
	  echo "Java 17 (or 21) is required by Spark and was not found: install a JDK" \
	       "(e.g. apt-get install openjdk-17-jre-headless) and set JAVA_HOME"; exit 2; }

# Train LogisticRegression on generated data in local Spark; prints metrics and the model path.
demo: $(STAMP)
	$(PY) -m sparkml.jobs.train --config conf/logistic_demo.yaml

# The test suite (the covering subset of the parity grid; the full grid is `make test-full`).
test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider --durations=15 tests

test-full: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -m "" tests

bench: $(STAMP)
	$(PY) benchmarks/bench_linear.py

clean:
	rm -rf $(VENV) runs build *.egg-info
