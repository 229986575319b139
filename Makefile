# Developer shortcuts; the README's commands are the supported entry points.  Like the
# README, they use an editable install: the checkout is the installed package, with
# ldpfast._C built into it (`make build` rebuilds it after a change to csrc/).
PY ?= python

.PHONY: build test lint demo bench-synthetic examples docs ci

build:
	$(PY) -m pip install -q -e ".[test]"

test: build
	pytest -q

lint:
	ruff check ldpfast tests benchmarks examples

demo: build
	ldpfast demo

bench-synthetic: build
	ldpfast bench synthetic --preset orkut

examples: build
	for f in examples/*.py; do $(PY) $$f --quick || exit 1; done

docs: build
	$(PY) -m pip install -q -r docs/api/requirements.txt
	$(PY) -m sphinx -W --keep-going -b html docs/api docs/api/_build/html

ci:
	bash .ci/run
