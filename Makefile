# One command set, used the same way locally and in CI (.ci/run).
PYTHON ?= python3
STAMP := .make/installed

.PHONY: help install demo demo-down test unit lint crds clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/'

$(STAMP): pyproject.toml
	$(PYTHON) -m pip install --quiet -e '.[test]'
	command -v kubectl >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubernetes-client)
	$(PYTHON) -m kinitiras_py dev build
	@mkdir -p .make && touch $(STAMP)

install: $(STAMP) ## install the package, test tools, Debian packages and the cached Kubernetes build

demo: install ## bring up the local control plane with the policies of the demo
	PYTHON=$(PYTHON) bash hack/demo.sh

demo-down: ## stop the demo
	$(PYTHON) -m kinitiras_py dev down

test: install ## run every test, the local control plane included
	$(PYTHON) -m pytest -q

unit: install ## run only the tests that need no cluster (seconds)
	$(PYTHON) -m pytest -q -m "not cluster"

lint: install ## ruff and mypy
	$(PYTHON) -m ruff check kinitiras_py tests
	$(PYTHON) -m mypy

crds: ## regenerate api/ from the models
	$(PYTHON) -m kinitiras_py crds --write api

clean: ## remove build stamps and caches of this checkout
	rm -rf .make .pytest_cache .mypy_cache .ruff_cache
