# ccsynth: the HTTP service (`ccsynth serve`). Multi-stage: the builder has what HiGHS's
# bundled C++ build needs (cmake, libclang for bindgen); the runtime is slim, since HiGHS is
# linked statically.
FROM rust:1.95-bookworm AS builder
RUN apt-get update \
 && apt-get install -y --no-install-recommends cmake libclang1-14 clang \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
COPY migrations ./migrations
COPY openapi.yaml ./
RUN cargo build --release --locked --bin ccsynth

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl libstdc++6 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /data --create-home ccsynth
COPY --from=builder /src/target/release/ccsynth /usr/local/bin/ccsynth
USER ccsynth
WORKDIR /data
# The SQLite file lives here unless DATABASE_URL points at PostgreSQL.
VOLUME ["/data"]
# Listening beyond loopback needs tokens: mount NAME TOKEN lines (tokens of 16 characters or
# more) at /run/secrets/ccsynth_tokens (a Docker secret, or -v FILE:/run/secrets/ccsynth_tokens:ro).
# Without the file the server refuses to start; `serve --allow-open` serves it open anyway.
ENV CCSYNTH_ADDR=0.0.0.0:8080 \
    DATABASE_URL=sqlite:/data/ccsynth.db \
    CCSYNTH_TOKENS_FILE=/run/secrets/ccsynth_tokens
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1
ENTRYPOINT ["ccsynth"]
CMD ["serve"]
