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

command -v cargo >/dev/null 2>&1 || {
  echo "setup: cargo not found; install Rust (rustup) first" >&2
  exit 1
}
