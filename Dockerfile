# moat as a service: an image that runs `moat serve`, built from source.
#
#   docker build -t moat:latest .
#   docker build --build-arg BUILD_BASE=… --build-arg RUNTIME_BASE=… -t moat:latest .
#
# Both bases are build arguments so that a site can point them at its own mirror. A machine
# that cannot pull images at all uses Dockerfile.local instead (scripts/build-moat-image),
# which packages a binary built on the host into the locally bootstrapped moat-base image.
ARG BUILD_BASE=rust:1.95-bookworm
ARG RUNTIME_BASE=debian:bookworm-slim

FROM ${BUILD_BASE} AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin moat \
 && install -m 0755 target/release/moat /moat

FROM ${RUNTIME_BASE}
COPY --from=build /moat /usr/local/bin/moat
# moat runs as root in here: it drives the host's Docker engine through the mounted socket
# (which is root-equivalent anyway) and hands workspace files to the sandbox user (1000).
# The commands it runs never execute in this container, only in their session containers.
ENV MOAT_HOME=/var/lib/moat
EXPOSE 7878
ENTRYPOINT ["/usr/local/bin/moat"]
CMD ["serve", "--tcp", "0.0.0.0:7878"]
