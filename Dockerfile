# Builds the agentstate binary (used by docker-compose.yml's spill service).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked

FROM debian:bookworm-slim
COPY --from=build /src/target/release/agentstate /usr/local/bin/agentstate
ENTRYPOINT []
