# Two commands on a fresh machine: `make demo` and `make test` (Java 17+ must be installed).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-full test-compat test-wheel dist bench clean java

$(STAMP): pyproject.toml constraints.txt
	@$(MAKE) --no-print-directory java
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e ".[spark,test,plot,jobs]"
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

# The wheel and the sdist, built from this checkout into dist/.
dist: $(STAMP)
	rm -rf dist
	$(PY) -m build --no-isolation --outdir dist . >/dev/null
	@ls dist

# The compatibility run: for each supported Spark line, a virtual environment with that pyspark and the built
# wheel (not this checkout), the tests marked `compat`, and the example job run from the installed wheel.
COMPAT_PYSPARK ?= 3.5.9 4.0.5
COMPAT_VENV = .venv-pyspark-$(1)

test-compat: dist
	@for v in $(COMPAT_PYSPARK); do $(MAKE) --no-print-directory compat-venv-$$v compat-run-$$v || exit 1; done

compat-venv-%:
	rm -rf $(call COMPAT_VENV,$*)
	$(PYTHON) -m venv $(call COMPAT_VENV,$*)
	grep -v '^pyspark==' constraints.txt > $(call COMPAT_VENV,$*)/constraints.txt
	echo 'pyspark==$*' >> $(call COMPAT_VENV,$*)/constraints.txt
	$(call COMPAT_VENV,$*)/bin/python -m pip install --quiet --upgrade pip
	$(call COMPAT_VENV,$*)/bin/python -m pip install --quiet -c $(call COMPAT_VENV,$*)/constraints.txt \
	  "$$(ls dist/*.whl)[spark,connect,jobs]" pytest hypothesis scikit-learn

compat-run-%:
	cd /tmp && $(CURDIR)/$(call COMPAT_VENV,$*)/bin/python -c \
	  "import sparkml, pyspark; print('pyspark', pyspark.__version__, 'sparkml from', sparkml.__file__)"
	$(call COMPAT_VENV,$*)/bin/python -m pytest -q -p no:cacheprovider -m compat --durations=10 tests
	$(MAKE) --no-print-directory wheel-demo PYTHON_BIN=$(CURDIR)/$(call COMPAT_VENV,$*)/bin

# The example job from an installed package: its console script, its bundled config, run outside the checkout.
wheel-demo:
	rm -rf /tmp/sparkml-wheel-demo && mkdir -p /tmp/sparkml-wheel-demo
	cd /tmp/sparkml-wheel-demo && PATH=$(PYTHON_BIN):$$PATH $(PYTHON_BIN)/sparkml-train --config logistic_demo.yaml \
	  --set output.dir=/tmp/sparkml-wheel-demo/model
	test -f /tmp/sparkml-wheel-demo/model/metrics.json

bench: $(STAMP)
	$(PY) benchmarks/bench_linear.py

clean:
	rm -rf $(VENV) .venv-pyspark-* runs build dist *.egg-info
