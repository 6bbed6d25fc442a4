# Two commands for a new user: `make run` and `make test`. Both build the virtual
# environment in .venv from requirements.lock first when it is missing or stale.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
SES    := $(VENV)/bin/ses
STAMP  := $(VENV)/.installed-from-lock
# the project itself, installed editable into .venv: the `ses` command, `import jobs` anywhere
SELF   := $(VENV)/.installed-project
# the kernels compiled ahead of time (its manifest; the extension module lies beside it)
AOT    := jobs/core/engine/_kernels_aot.json
# the archive of Spark's classes for the driver's JVM (jobs/spark/cds.py): what was built
CDS    := $(VENV)/spark-classes.json
UV     := $(VENV)/bin/uv
UV_VERSION := $(shell sed -n 's/^uv==//p' requirements.lock)

.PHONY: run test test-fast browser lint validate new-pattern pr-check pattern-tests cluster-up cluster-down docs bench airflow lock clean-venv

$(STAMP): requirements.lock
	@echo "setting up $(VENV) from requirements.lock (first time: several minutes)…"
	@rm -rf $(VENV)
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required, found " + sys.version.split()[0]'
	@$(PYTHON) -m venv $(VENV)
	@# uv (pinned in the lock) installs the locked set in parallel: about 30 s against pip's
	@# 90-150 s; pip does it when uv cannot be had. Both leave the packages' bytecode
	@# compiled: with PYTHONDONTWRITEBYTECODE set (as on these machines) a process would
	@# otherwise compile every module it imports, about 5 s for each Spark or GX process
	@# uv builds pyspark's sdist into its cache again whenever the index answers "modified"
	@# (1.4 GB each time on these machines); `uv cache prune` drops the revisions no longer used,
	@# so that a machine building many clean clones does not fill its disk
	@# A machine that installed the locked set before has every wheel in uv's cache: offline,
	@# uv neither revalidates nor builds pyspark again (16-20 s against 41 s); a cache that
	@# misses any of them fails before installing anything, and uv then downloads
	@if $(PY) -m pip install --quiet --disable-pip-version-check "uv==$(UV_VERSION)"; then \
	  { $(UV) pip install --quiet --offline --compile-bytecode --python $(PY) -r requirements.lock 2>/dev/null || \
	    $(UV) pip install --quiet --compile-bytecode --python $(PY) -r requirements.lock; } && \
	  { $(UV) cache prune --quiet || true; }; \
	else echo "uv $(UV_VERSION) not available: installing with pip"; \
	  $(PY) -m pip install --quiet --disable-pip-version-check -r requirements.lock && \
	  { $(PY) -m compileall -q -j 0 $(VENV)/lib >/dev/null || true; }; fi
	@touch $(STAMP)

# The matching kernels: Numba's cache and, beside it in a second process, the ahead-of-time module
# (jobs/core/engine/aot.py) of the committed signatures (aot_signatures.json), built
# again whenever the kernels' source changes
$(AOT): $(STAMP) jobs/core/engine/kernels.py jobs/core/engine/kernel_codes.py jobs/core/engine/aot.py jobs/core/local/aot_build.py jobs/core/engine/aot_signatures.json
	@echo "compiling the matching kernels (once per checkout, a minute or two)…"
	@$(PY) -m jobs.core.local.aot_build

# Spark's classes archived once per venv (about 30 s): every later session's JVM maps them
# and starts about 2 s sooner; a Java that cannot make the archive leaves a note, not an error
$(CDS): $(STAMP) jobs/spark/cds.py
	@echo "archiving Spark's classes for faster JVM starts (once per venv, about 30 s)…"
	@$(PY) -m jobs.spark.cds

$(SELF): $(STAMP) $(AOT) $(CDS) pyproject.toml
	@if [ -x $(UV) ]; then $(UV) pip install --quiet --python $(PY) --no-deps -e .; \
	else $(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .; fi
	@touch $(SELF)

# Headless Chromium (Debian's package) for the catalogue site's tests
browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || { \
	  echo "installing chromium (Debian package) for the catalogue site's browser tests…"; \
	  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; } >/dev/null \
	  || { echo "could not install chromium: install it (Debian/Ubuntu: sudo apt-get install chromium) and rerun"; exit 1; }; }

# The whole suite on two pytest-xdist workers, one test module per worker at a time (a
# module's fixtures are built once; xdist hands out the modules with most tests first);
# docs/testing.md. WORKERS=0 runs it in one process.
WORKERS ?= 2
# the project's own bytecode, brought up to date before a run (PYTHONDONTWRITEBYTECODE
# keeps Python from writing it): every test worker, subprocess and Spark Python worker
# would compile the modules it imports again
PYC = $(PY) -m compileall -q -j 0 jobs dags tests spark_entry.py >/dev/null || true
XDIST = $(if $(filter 0,$(WORKERS)),,-n $(WORKERS) --dist loadfile --no-loadscope-reorder)

test: $(SELF) browser
	@$(PYC)
	$(PY) -m pytest -q --durations=25 $(XDIST)

# The edit-test loop: every test without Spark, Airflow or a browser (about a minute)
test-fast: $(SELF)
	@$(PYC)
	$(PY) -m pytest -q -m "not spark and not airflow and not browser" $(XDIST)

lint: $(SELF)
	$(PY) -m ruff check jobs tests bench dags spark_entry.py
	$(SES) validate

validate: $(SELF)
	$(SES) validate

# The catalogue site (site/ beside the lake): patterns, matches, runs, quality, lineage
docs: $(SELF)
	$(SES) docs

# A new pattern file to start from: make new-pattern NAME=my_pattern SOURCE=sepsis
new-pattern: $(SELF)
	@test -n "$(NAME)" -a -n "$(SOURCE)" || { echo "usage: make new-pattern NAME=my_pattern SOURCE=<a source of conf/sources.yaml>"; exit 2; }
	$(SES) new-pattern $(NAME) --source $(SOURCE)

# What a branch's pattern and model changes do to the published tables: validate them, run
# base and new versions in a scratch lake, report (pr-check/report.md). BASE: a git ref
# (default: the merge base with main); PROFILE: whose pr_check.sample to read.
pr-check: $(SELF)
	$(SES) pr-check $(if $(BASE),--base $(BASE)) $(if $(PROFILE),--profile $(PROFILE))

# The example tests of the pattern files changed since BASE
pattern-tests: $(SELF)
	@k="$$($(SES) pr-check --pytest-k $(if $(BASE),--base $(BASE)))" || exit 2; \
	if [ -z "$$k" ]; then echo "no changed pattern files: no pattern tests to run"; \
	else $(PY) -m pytest -q tests/test_pattern_examples.py -k "$$k"; fi

# make run PATTERN="patterns/a.yaml patterns/b.yaml": only those files
run: $(SELF)
	@$(PYC)
	$(SES) validate $(PATTERN)
	$(SES) run $(if $(PROFILE),--profile $(PROFILE)) $(foreach p,$(PATTERN),--pattern $(p))

# A Spark standalone cluster on this machine: a master and two workers (127.0.0.1:7077,
# UI on 8090), for `make run PROFILE=standalone`
cluster-up: $(SELF)
	$(SES) cluster up

cluster-down: $(SELF)
	$(SES) cluster down

# Airflow standalone on 127.0.0.1:8080 with dags/, settings for a 2-core machine.
# The admin password is printed at start and kept in .airflow/simple_auth_manager_passwords.json.generated.
airflow: $(SELF)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH \
	AIRFLOW_HOME=$(CURDIR)/.airflow \
	AIRFLOW__CORE__DAGS_FOLDER=$(CURDIR)/dags \
	AIRFLOW__CORE__LOAD_EXAMPLES=False \
	AIRFLOW__CORE__PARALLELISM=4 \
	AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG=2 \
	AIRFLOW__API__HOST=127.0.0.1 \
	AIRFLOW__API__PORT=8080 \
	$(VENV)/bin/airflow standalone

bench: $(SELF)
	$(PY) bench/peers.py
	$(PY) bench/startup.py
	$(PY) bench/match_windows.py --matcher ses --events 20000 --per-k 3
	$(PY) bench/match_windows.py --matcher zstream --events 8000 --per-k 2
	$(PY) bench/spark_pipeline.py --sets hospital,loans,10m

# Re-resolve the lock from requirements.in (needs the package index).
lock:
	rm -rf /tmp/ses-lock-venv && $(PYTHON) -m venv /tmp/ses-lock-venv
	/tmp/ses-lock-venv/bin/pip install --quiet -r requirements.in
	/tmp/ses-lock-venv/bin/pip check
	(echo '# Full pinned set, from `pip freeze` of a venv built from requirements.in (make lock). Do not edit by hand.'; \
	 /tmp/ses-lock-venv/bin/pip freeze) > requirements.lock

clean-venv:
	rm -rf $(VENV)
