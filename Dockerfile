# ccsynth: the HTTP service (`ccsynth serve`). Multi-stage: the builder has what HiGHS's
# bundled C++ build needs (cmake, libclang for bindgen); the runtime is slim, since HiGHS is
# linked statically.
FROM rust:1.95-bookworm AS builder
RUN apt-get update \
 && apt-get install -y --no-install-recommends cmake libclang1-14 clang \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# The dependencies (HiGHS's C++ build the longest) in a layer of their own, built against
# stand-in sources: a change to src/ rebuilds only the crate.
COPY Cargo.toml Cargo.lock build.rs ./
RUN mkdir src && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
 && cargo build --release --locked --bin ccsynth \
 && rm -rf src target/release/.fingerprint/ccsynth-* target/release/deps/ccsynth-* target/release/deps/libccsynth-*
COPY src ./src
COPY migrations ./migrations
COPY examples ./examples
COPY openapi.yaml ./
RUN cargo build --release --locked --bin ccsynth

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl libstdc++6 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /data --create-home ccsynth
COPY --from=builder /src/target/release/ccsynth /usr/local/bin/ccsynth
COPY scripts/docker-entrypoint.sh /usr/local/bin/ccsynth-entrypoint
USER ccsynth
WORKDIR /data
# The SQLite file lives here unless DATABASE_URL points at PostgreSQL.
VOLUME ["/data"]
# Listening beyond loopback needs tokens: mount NAME TOKEN lines (tokens of 16 characters or
# more) at /run/secrets/ccsynth_tokens (a Docker secret, or -v FILE:/run/secrets/ccsynth_tokens:ro);
# the entry point passes the file when it is there. Without it the server refuses to start;
# `serve --allow-open` serves it open. The entry point also fits the shutdown into `docker
# stop`'s 10 s (a 7 s grace unless --grace-ms is given; give `--stop-timeout` for more).
ENV CCSYNTH_ADDR=0.0.0.0:8080 \
    DATABASE_URL=sqlite:/data/ccsynth.db
EXPOSE 8080
# Where the entry point says the server listens and a Host it answers to (--addr, --allowed-host
# or their variables); before it has written that, the port CCSYNTH_ADDR names (a shell-form
# check, so the variables are read when it runs).
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
  CMD set -- $(cat /tmp/ccsynth-health 2>/dev/null); curl -fsS -H "Host: ${2:-127.0.0.1}" "${1:-http://127.0.0.1:${CCSYNTH_ADDR##*:}/healthz}" || exit 1
ENTRYPOINT ["ccsynth-entrypoint"]
CMD ["serve"]
