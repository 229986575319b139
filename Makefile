# Developer shortcuts; the README's commands are the supported entry points.
PY ?= python

.PHONY: build test lint demo bench-synthetic ci

build:
	$(PY) setup.py build_ext --inplace -j 2

test: build
	$(PY) -m pytest -q

lint:
	ruff check ldpfast tests benchmarks

demo: build
	$(PY) -m ldpfast demo

bench-synthetic: build
	$(PY) -m ldpfast bench synthetic --preset orkut

ci:
	bash .ci/run
