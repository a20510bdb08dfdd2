# Builds the agentstate binary (used by docker-compose.yml's spill service).
FROM rust:1.95-bookworm AS build
WORKDIR /src
# A release binary without debuginfo, stripped (Cargo.toml keeps line tables for local
# profiling; the image does not need them).
ENV CARGO_PROFILE_RELEASE_DEBUG=0 \
    CARGO_PROFILE_RELEASE_STRIP=symbols
# Dependencies first, in a layer of their own: with only the manifests and stub sources,
# this layer is rebuilt when Cargo.toml or Cargo.lock change, not on every source edit.
COPY Cargo.toml Cargo.lock ./
RUN mkdir -p src tests/it \
 && echo 'fn main() {}' > src/main.rs \
 && touch src/lib.rs tests/it/main.rs \
 && cargo build --release --locked --bin agentstate \
 && rm -rf src tests
COPY . .
# COPY keeps the files' own times, which may be older than the stub build: touch them so
# cargo rebuilds the crate itself.
RUN touch src/main.rs src/lib.rs \
 && cargo build --release --locked --bin agentstate

FROM debian:bookworm-slim
# ca-certificates: rediss:// to a managed Redis verifies its certificate against these
# (a private CA: set SSL_CERT_FILE=/path/ca.pem). sqlite3: inspect the database in the
# volume (`docker compose exec spill sqlite3 /data/agentstate.db`).
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates sqlite3 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/agentstate /usr/local/bin/agentstate
WORKDIR /data
ENTRYPOINT []
