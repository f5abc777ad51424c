# Everything builds from nothing: `make test` creates .venv, installs the package with its
# extras, checks Java 17 for Spark, then runs lint, types and the test suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export PYTHONHASHSEED := 0

.PHONY: venv node-client browser test lint typecheck pytest package-check demo bench bench-quick java-check clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@# the distribution was called `routing` before 0.2.0: drop an old editable install
	-@$(BIN)/pip uninstall --quiet --yes routing >/dev/null 2>&1
	$(BIN)/pip install --quiet -e '.[dev,testing,spark,connect,cli,metrics,uvloop]'
	touch $(STAMP)

venv: $(STAMP)

# A real RocketMQ remoting client (pure JavaScript) for tests/test_remoting_client_interop.py.
# Best effort: without Node.js or the npm registry the interop test skips with the reason.
.node/node_modules/ali-ons/package.json:
	-@command -v npm >/dev/null 2>&1 && npm install --silent --no-audit --no-fund --prefix .node ali-ons@3.12.0 >/dev/null 2>&1 || echo "note: ali-ons not installed; the client interop test will be skipped"

node-client: .node/node_modules/ali-ons/package.json

# Headless Chromium for tests/test_report_browser.py (Debian's package, driven by Playwright
# from the `browser` extra). Installed when missing and running as root; otherwise the test
# skips, except in CI (CI set), where a missing browser fails it.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium (apt-get) for the report's browser test"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else echo "note: chromium is missing; the report's browser test will skip (and fail in CI)"; fi; }

java-check:
	@java -version >/dev/null 2>&1 || { echo "Java 17+ is needed for the Spark pipeline (apt-get install openjdk-17-jre-headless)"; exit 1; }
	@$(PYTHON) -c "import re,subprocess,sys; out=subprocess.run(['java','-version'],capture_output=True,text=True).stderr; m=re.search(r'version \"(\d+)', out); v=int(m.group(1)) if m else 0; sys.exit(0 if v>=17 else print(f'Java {v} found; the Spark pipeline needs Java 17+') or 1)"

lint: venv
	$(BIN)/ruff check src tests benchmarks

typecheck: venv
	$(BIN)/mypy --strict src

pytest: venv java-check node-client browser
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-ci} $(BIN)/python -m pytest -q --durations=15

# The package as users get it: wheel + sdist, installed (not editable) in a fresh venv
# outside the checkout, then import, CLI, plugin fixtures and from_type checked there.
package-check: venv
	$(BIN)/python tests/package/check_wheel.py

test: lint typecheck pytest package-check

demo: venv java-check
	$(BIN)/routing demo

bench: venv
	$(BIN)/python -m benchmarks

bench-quick: venv
	$(BIN)/python -m benchmarks --quick

clean:
	rm -rf $(VENV) build dist src/*.egg-info
