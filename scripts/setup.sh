#!/usr/bin/env bash
# Installs what building ccsynth needs beyond a Rust toolchain, on Debian; with
# --with-postgres, also a local PostgreSQL for the API tests (the README's test command and
# .ci/run ask for it; building and running ccsynth do not). Idempotent and quiet when everything
# is present.
set -euo pipefail

WITH_POSTGRES=0
for arg in "$@"; do
  case $arg in
    --with-postgres) WITH_POSTGRES=1 ;;
    *)
      echo "setup: unknown argument $arg (expected --with-postgres)" >&2
      exit 2
      ;;
  esac
done

# Debian packages the build needs, as "command-to-check:package" pairs. The HiGHS solver (the
# ILP synthesizer, linked statically) is built from source by highs-sys: cmake drives its C++
# build with g++, and bindgen needs libclang. None is needed at run time.
NEEDED=(
  "g++:g++"
  "cmake:cmake"
  "/usr/lib/llvm-14/lib/libclang.so.1:libclang1-14"
)
if ((WITH_POSTGRES)); then
  NEEDED+=("pg_ctlcluster:postgresql")
fi

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
# a role that may log in and create databases (one per test, which it then owns) and nothing
# more. SQLite needs nothing.
SUDO=""
AS_PG=(runuser -u postgres --)
if [[ $(id -u) -ne 0 ]]; then
  SUDO="sudo"
  AS_PG=(sudo -u postgres)
fi
if ((WITH_POSTGRES)) && command -v pg_lsclusters >/dev/null 2>&1; then
  if ! pg_lsclusters -h | grep -q online; then
    $SUDO service postgresql start >/dev/null 2>&1 || $SUDO pg_ctlcluster "$(pg_lsclusters -h | awk 'NR==1{print $1}')" main start
  fi
  for _ in $(seq 1 30); do
    pg_isready -q -h 127.0.0.1 && break
    sleep 0.5
  done
  if ! "${AS_PG[@]}" psql -tAc "SELECT 1 FROM pg_roles WHERE rolname = 'ccsynth'" 2>/dev/null | grep -q 1; then
    "${AS_PG[@]}" psql -q -c "CREATE ROLE ccsynth LOGIN CREATEDB PASSWORD 'ccsynth'" >/dev/null
  fi
  # Least privilege also for a role an earlier version of this script made a superuser.
  "${AS_PG[@]}" psql -q -c "ALTER ROLE ccsynth NOSUPERUSER NOCREATEROLE CREATEDB LOGIN" >/dev/null
fi

command -v cargo >/dev/null 2>&1 || {
  echo "setup: cargo not found; install Rust (rustup) first" >&2
  exit 1
}
