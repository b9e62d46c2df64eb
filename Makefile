# Fresh machine: `make demo` runs the main job, `make test` runs every test.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
JOBS   ?= 2

.PHONY: demo test test-full conformance pytest lit lint lint-baseline bench fuzz clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,onnx,gpu,jax,models,lint]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

test: pytest lit

# every ONNX node-suite case and every zoo model with both exporters (slow: about half an hour)
test-full: $(STAMP)
	MLFUSE_TEST_FULL=1 $(PY) -m pytest -n $(JOBS) tests/test_onnx_node_suite.py tests/test_model_zoo.py

# the node suite's per-operator table: bench/results/onnx_conformance.md
conformance: $(STAMP)
	$(PY) -m bench.onnx_conformance

pytest: $(STAMP)
	$(PY) -m pytest -n $(JOBS) tests

# ruff (pyproject's [tool.ruff]), basedpyright in basic mode on the package and examples ([tool.pyright]; the errors that predate it
# are in .basedpyright/baseline.json, so only new ones fail), function length and the docs' citations
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/basedpyright --baselinemode=lock
	$(PY) -m pytest -q tests/test_house.py tests/test_docs.py

# after fixing type errors (or when a change moves old ones): rewrite the baseline of remaining errors
lint-baseline: $(STAMP)
	$(VENV)/bin/basedpyright --writebaseline

lit: $(STAMP)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/lit -v filecheck

# mutated lit files, examples and ONNX models through mlfuse-opt, mlfuse-run and mlfuse.compile
# (tests/fuzz); failing inputs go to fuzz-failures/
FUZZ_CASES ?= 2000
FUZZ_SEED  ?= 1
fuzz: $(STAMP)
	$(PY) -m tests.fuzz --cases $(FUZZ_CASES) --seed $(FUZZ_SEED) --jobs $(JOBS) --out fuzz-failures

# the peers (numexpr, matplotlib, torch, jax) come with the bench extra; BENCH_ARGS=--quick for a smoke run.
# bench/ is in the checkout, not in the package: no installed mlfuse-bench command (python -m bench)
bench: $(STAMP)
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
