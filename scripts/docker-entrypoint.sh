#!/bin/sh
# The container's entry point (Dockerfile): runs `ccsynth "$@"`, and for `serve`
# - passes the tokens file only when one is mounted (CCSYNTH_TOKENS_PATH, default
#   /run/secrets/ccsynth_tokens), so `docker run IMAGE serve --allow-open` starts open and a
#   mounted secret turns tokens on (an explicit --tokens-file or CCSYNTH_TOKENS_FILE wins);
# - gives running jobs a 7 s grace unless --grace-ms is given, so drain (1 s) + grace + the
#   2 s a stopped solve takes to hand its job back fit `docker stop`'s default 10 s.
set -eu
BIN="${CCSYNTH_BIN:-ccsynth}"
if [ "${1:-}" = "serve" ]; then
    TOKENS="${CCSYNTH_TOKENS_PATH:-/run/secrets/ccsynth_tokens}"
    if [ -z "${CCSYNTH_TOKENS_FILE:-}" ] && [ -f "$TOKENS" ]; then
        export CCSYNTH_TOKENS_FILE="$TOKENS"
    fi
    case " $* " in
        *" --grace-ms "* | *" --grace-ms="*) ;;
        *) shift; set -- serve --grace-ms 7000 "$@" ;;
    esac
fi
exec "$BIN" "$@"
