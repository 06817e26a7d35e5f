# ctxview: `make demo` runs it with demo data, `make test` runs the tests.
PYTHON ?= python3
# make demo PORT=8001 when 8000 is taken
PORT ?= 8000
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-fast fuzz bench lint install

# Some machines set PYTHONDONTWRITEBYTECODE=1: then every Python process compiles the project's modules
# again, and pytest rewrites every test module's asserts again (16 s of each run's collection instead
# of 10; every server, worker and scenario process the tests start pays it too). __pycache__ is ignored.
unexport PYTHONDONTWRITEBYTECODE

$(VENV)/installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/installed

demo: $(VENV)/installed
	$(BIN)/python manage.py migrate --noinput -v0
	$(BIN)/python manage.py demo --port $(PORT)

# The suite on every core (pytest-xdist: a database and a task queue per worker; a file's tests stay
# together), then the tests that measure how long something took, with the machine to themselves. The
# slowest twenty are listed: where the suite's time goes, in every CI log.
# make test JOBS=1 runs it in one process.
JOBS ?= auto
test: $(VENV)/installed
	$(BIN)/python -m pytest -n $(JOBS) --dist loadfile -m "not timing" --durations=20 $(TEST_ARGS)
	$(BIN)/python -m pytest -m timing $(TEST_ARGS)

# The edit loop's tier: the analyses, ingest, views and API, in SQLite with tasks in-process, on every
# core; no browser, fuzz, fault, CLI, live-instrumentation or timing tests, nor the demo's, the login
# throttle's, the gRPC server processes', the CLI sessions' replays and the words on every demo page (they
# wait on real processes and windows, or render the whole demo: a minute of the tier). make test runs
# them all.
test-fast: $(VENV)/installed
	env -u DATABASE_URL -u CELERY_BROKER_URL -u CTXVIEW_REQUIRE_SERVICES -u CTXVIEW_CACHE_URL \
		$(BIN)/python -m pytest -n $(JOBS) --dist loadfile -q \
		-m "not timing and not services and not cli" tests/ctxcore tests/ingest tests/ctxview tests/sdk \
		tests/test_layering.py --ignore=tests/ctxview/test_demo.py \
		--ignore=tests/ctxview/test_login_throttle.py --ignore=tests/ctxview/test_words.py \
		--ignore=tests/ingest/test_grpc_receiver.py --ignore=tests/ingest/test_session_calls.py $(TEST_ARGS)

# The fuzz suites at their deep budgets: over 100,000 cases (see tests/fuzz/conftest.py).
# make fuzz FUZZ_ARGS=--hypothesis-seed=N replays the cases of seed N (CI does).
fuzz: $(VENV)/installed
	CTXVIEW_FUZZ_PROFILE=deep $(BIN)/python -m pytest -n $(JOBS) --dist loadfile tests/fuzz -q $(FUZZ_ARGS)

bench: $(VENV)/installed
	$(BIN)/python bench/suite.py $(BENCH_ARGS)
	$(BIN)/python bench/proxy.py
	$(BIN)/python bench/check.py
	$(BIN)/python bench/monitors.py --calls 10000,100000
	$(BIN)/python bench/partitions.py

lint: $(VENV)/installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
