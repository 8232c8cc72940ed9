#!/usr/bin/env bash
# Leg: report.html as a person sees it. A real headless Chromium lays out the report of a failing run and a probe
# reads the page (no SVG text past its edge, no caption or message past its box, one failure card per distinct
# result): tests/integration/test_report_in_a_browser.py, which the main legs skip where Chromium is missing.
# Chromium comes from Debian's packages (CI runs as root); the test runs in a fresh venv of the newest Python.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../netretry.sh"   # with_retries, pip retry settings

venv="${CASTGUARD_CI_VENV_BASE:-$PWD/.ci-venv}-report-browser"
python="${CASTGUARD_CI_PYTHON:-python3}"
if ! command -v chromium >/dev/null 2>&1; then
    echo "45-report-browser: installing chromium (apt-get)"
    with_retries apt-get -o Acquire::Retries=5 update -qq >/dev/null
    with_retries env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=5 install -y -qq chromium fonts-dejavu-core >/dev/null
fi
echo "45-report-browser: $(chromium --version 2>/dev/null | head -n 1)"
rm -rf "$venv"
"$python" -m venv "$venv"
with_retries "$venv/bin/python" -m pip install --quiet --upgrade pip
with_retries "$venv/bin/python" -m pip install --quiet -e ".[dev]"
# -rs and the skip check: this leg exists to run the test, so a skip here is a failure
out="$("$venv/bin/python" -m pytest -p no:cacheprovider -rs tests/integration/test_report_in_a_browser.py 2>&1)" || {
    echo "$out"; exit 1; }
echo "$out" | tail -n 3
if echo "$out" | grep -q "skipped"; then
    echo "45-report-browser: FAILED - the browser test skipped" >&2
    exit 1
fi
