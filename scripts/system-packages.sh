#!/usr/bin/env bash
# The Debian packages a make target needs, installed by the target itself (issue 42): a fresh machine passes the
# README's `make demo` and `make test` with nothing else run first.
#
#   scripts/system-packages.sh node    what the local process nodes need (make demo, make test)
#   scripts/system-packages.sh test    the above, plus what the tests drive (Chromium, Firefox ESR, Open MPI with mpi4py)
#
# As root, missing packages are installed with apt-get (once: a second call finds them and prints nothing). Without
# root, one line names the command to run, and the exit status is 1, so `make` stops there instead of letting a test
# fail or skip twenty minutes later.
set -euo pipefail

set_name=${1:-test}
missing=()

need() {  # need PACKAGE CHECK... : PACKAGE is missing when the check command fails
  local package=$1
  shift
  "$@" >/dev/null 2>&1 || missing+=("$package")
}

# Local process nodes: `ip` for pod network namespaces and the cluster bridge; a system Python 3 that every user can
# run, with venv, for the venvs that stand in for images (the pyenv Python lives under a 0700 home).
need iproute2 command -v ip
need python3 test -x /usr/bin/python3
need python3-venv /usr/bin/python3 -c 'import ensurepip, venv'
# `make demo` polls the operator's /readyz with curl.
need curl command -v curl

if [ "$set_name" = test ]; then
  # The web UI's browser tests drive Debian's Chromium through Playwright (no browser is ever downloaded).
  need chromium test -x "${TJ_CHROMIUM:-/usr/bin/chromium}"
  # ... and a second engine, Firefox ESR, through Puppeteer over WebDriver BiDi (tests/integration/test_ui_firefox.py).
  need firefox-esr test -x "${TJ_FIREFOX:-/usr/bin/firefox-esr}"
  # The MPI example's image (examples/mpi, tests/integration/test_roles_mpi.py) is Debian's Open MPI with mpi4py.
  need openmpi-bin command -v mpirun
  need python3-mpi4py /usr/bin/python3 -c 'import mpi4py'
  # Seed 002's launch script waits for rank 0 with `nc -z` (examples/seed-guide, tests/integration/test_seed_guide.py).
  need netcat-openbsd command -v nc
fi

[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "missing system packages; run: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
started=$(date +%s)
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "installed ${missing[*]} in $(( $(date +%s) - started ))s"
