#!/bin/sh
# The container's entry point (Dockerfile): runs `ccsynth "$@"`, and for `serve`
# - passes the tokens file only when one is mounted (CCSYNTH_TOKENS_PATH, default
#   /run/secrets/ccsynth_tokens), so `docker run IMAGE serve --allow-open` starts open and a
#   mounted secret turns tokens on (an explicit --tokens-file or CCSYNTH_TOKENS_FILE wins);
#   a mounted file the server's user cannot read is named with that user's uid;
# - gives running jobs a 7 s grace unless --grace-ms is given, so drain (1 s) + grace + the
#   2 s a stopped solve takes to hand its job back fit `docker stop`'s default 10 s;
# - writes where the HEALTHCHECK probes (CCSYNTH_HEALTH_FILE, default /tmp/ccsynth-health):
#   the /healthz URL on the port the server listens on (--addr, else CCSYNTH_ADDR) and a Host
#   it answers to (the first --allowed-host, else CCSYNTH_ALLOWED_HOSTS's first).
set -eu
BIN="${CCSYNTH_BIN:-ccsynth}"
if [ "${1:-}" = "serve" ]; then
    TOKENS="${CCSYNTH_TOKENS_PATH:-/run/secrets/ccsynth_tokens}"
    if [ -z "${CCSYNTH_TOKENS_FILE:-}" ] && [ -f "$TOKENS" ]; then
        if [ ! -r "$TOKENS" ]; then
            echo "ccsynth: $TOKENS is mounted but uid $(id -u) (the server's user) cannot read it: give it to uid $(id -u) (a Docker secret's uid, or chown) or make it readable (mode 0444)" >&2
            exit 2
        fi
        export CCSYNTH_TOKENS_FILE="$TOKENS"
    fi
    addr="${CCSYNTH_ADDR:-127.0.0.1:8080}"
    host="$(printf '%s' "${CCSYNTH_ALLOWED_HOSTS:-}" | cut -d, -f1)"
    given_host=""
    prev=""
    for a in "$@"; do
        case "$prev" in
            --addr) addr="$a" ;;
            --allowed-host) [ -n "$given_host" ] || given_host="$a" ;;
        esac
        case "$a" in
            --addr=*) addr="${a#--addr=}" ;;
            --allowed-host=*) [ -n "$given_host" ] || given_host="${a#--allowed-host=}" ;;
        esac
        prev="$a"
    done
    [ -z "$given_host" ] || host="$given_host"
    ip="${addr%:*}"
    case "$ip" in
        0.0.0.0 | "" | "[::]") ip=127.0.0.1 ;;
    esac
    host="${host:-${ip#[}}"
    host="${host%]}"
    printf 'http://%s:%s/healthz %s\n' "$ip" "${addr##*:}" "$host" > "${CCSYNTH_HEALTH_FILE:-/tmp/ccsynth-health}" || true
    case " $* " in
        *" --grace-ms "* | *" --grace-ms="*) ;;
        *) shift; set -- serve --grace-ms 7000 "$@" ;;
    esac
fi
exec "$BIN" "$@"
