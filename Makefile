# ctxview: `make demo` runs it with demo data, `make test` runs the tests.
PYTHON ?= python3
# make demo PORT=8001 when 8000 is taken
PORT ?= 8000
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test fuzz bench lint install

$(VENV)/installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/installed

demo: $(VENV)/installed
	$(BIN)/python manage.py migrate --noinput -v0
	$(BIN)/python manage.py demo --port $(PORT)

test: $(VENV)/installed
	$(BIN)/python -m pytest

# The fuzz suites at their deep budgets: over 100,000 cases (see tests/fuzz/conftest.py).
# make fuzz FUZZ_ARGS=--hypothesis-seed=N replays the cases of seed N (CI does).
fuzz: $(VENV)/installed
	CTXVIEW_FUZZ_PROFILE=deep $(BIN)/python -m pytest tests/fuzz -q $(FUZZ_ARGS)

bench: $(VENV)/installed
	$(BIN)/python bench/suite.py $(BENCH_ARGS)

lint: $(VENV)/installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
