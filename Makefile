# gb10.serving: `make sim` (two simulated GB10 nodes, converged) and `make test` (every test).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
# Where sim/publish_image.sh records the stand-in's registry digest; inventories/sim reads it (placeholder if absent).
export GB10_SIM_IMAGES := $(CURDIR)/sim/build/images.yml
export GB10_SIM_WHEELHOUSE := $(CURDIR)/sim/build/wheelhouse
SIM_PROFILE ?= sim-replicas
SIM_NODES ?= 2
export SIM_NODES

.PHONY: help plan venv collections sim sim-images sim-up sim-publish sim-converge sim-down test lint unit molecule integration test-serving molecule-tp clean

help:
	@echo "make sim       build and start the two-node simulation, converge site.yml (SIM_PROFILE=$(SIM_PROFILE))"
	@echo "make sim-down  remove every container, network and volume the simulation made"
	@echo "make test      lint + unit tests + integration tests + molecule test (the command CI runs)"

$(BIN)/.installed: requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
	  || { echo "Python 3.11 is required (ansible-core 2.19 pins): set PYTHON=python3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.txt
	touch $@

venv: $(BIN)/.installed

collections: venv
	@scripts/collections.sh

sim-images: collections
	@sim/build_images.sh
	@sim/standin/build.sh
	@sim/wheelhouse/prepare.sh

sim-up: sim-images
	@sim/up.sh
	@sim/hub/up.sh

sim-converge: collections
	ansible-playbook -i inventories/sim site.yml -e serving_profile=$(SIM_PROFILE)

sim-publish: sim-up
	@sim/publish_image.sh

sim: sim-publish sim-converge
	@sim/hello.sh

plan: collections
	ansible-playbook -i inventories/sim playbooks/plan.yml -e serving_profile=$(SIM_PROFILE)

sim-down:
	@sim/down.sh

lint: collections
	ruff check .
	ruff format --check .
	yamllint -s .
	ansible-lint
	$(BIN)/python scripts/check_argument_specs.py

unit: collections
	pytest -q tests/unit

# tests/integration/serving needs a converged site: in `make test` it runs once inside molecule default's verify.
integration: collections sim-images
	pytest -q tests/integration --ignore=tests/integration/serving

test-serving: collections sim-images
	pytest -q -s tests/integration/serving

# make test runs every scenario but tensor_parallel: the served-site suite in default's verify already switches
# that site to tensor parallel over real Ray and back (test_90); the scenario itself costs ~20 more minutes.
MOLECULE_SCENARIOS ?= default model_weights nvidia_lockstep
molecule: collections sim-images
	set -e; for s in $(MOLECULE_SCENARIOS); do molecule test -s $$s; done

molecule-tp: collections sim-images
	molecule test -s tensor_parallel

# The rolling upgrade's overhead beyond each replica's own restart time, on a converged `make sim` (prints figures).
.PHONY: bench-upgrade
bench-upgrade: collections
	$(BIN)/python scripts/bench_upgrade.py

test: lint unit integration molecule

clean: sim-down
	rm -rf $(VENV) collections .pytest_cache .ruff_cache
