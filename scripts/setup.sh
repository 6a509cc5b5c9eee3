#!/usr/bin/env bash
# Installs what ccsynth needs beyond a Rust toolchain, on Debian. Idempotent and quiet when
# everything is present. Both README commands and .ci/run call it.
set -euo pipefail

# Debian packages the build needs, as "command-to-check:package" pairs. The HiGHS solver (the
# ILP synthesizer, linked statically) is built from source by highs-sys: cmake drives its C++
# build and bindgen needs libclang. Neither is needed at run time.
NEEDED=(
  "cmake:cmake"
  "/usr/lib/llvm-14/lib/libclang.so.1:libclang1-14"
  "pg_ctlcluster:postgresql"
)

missing=()
for pair in "${NEEDED[@]+"${NEEDED[@]}"}"; do
  probe=${pair%%:*}
  pkg=${pair#*:}
  if [[ $probe == /* ]]; then
    ls $probe >/dev/null 2>&1 || missing+=("$pkg")
  else
    command -v "$probe" >/dev/null 2>&1 || missing+=("$pkg")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# PostgreSQL for the API tests (the service's second backend): a local server on loopback with
# a superuser role the tests use to create one database per test. SQLite needs nothing.
SUDO=""
AS_PG=(runuser -u postgres --)
if [[ $(id -u) -ne 0 ]]; then
  SUDO="sudo"
  AS_PG=(sudo -u postgres)
fi
if command -v pg_lsclusters >/dev/null 2>&1; then
  if ! pg_lsclusters -h | grep -q online; then
    $SUDO service postgresql start >/dev/null 2>&1 || $SUDO pg_ctlcluster "$(pg_lsclusters -h | awk 'NR==1{print $1}')" main start
  fi
  for _ in $(seq 1 30); do
    pg_isready -q -h 127.0.0.1 && break
    sleep 0.5
  done
  if ! "${AS_PG[@]}" psql -tAc "SELECT 1 FROM pg_roles WHERE rolname = 'ccsynth'" 2>/dev/null | grep -q 1; then
    "${AS_PG[@]}" psql -q -c "CREATE ROLE ccsynth LOGIN SUPERUSER PASSWORD 'ccsynth'" >/dev/null
  fi
fi

command -v cargo >/dev/null 2>&1 || {
  echo "setup: cargo not found; install Rust (rustup) first" >&2
  exit 1
}
