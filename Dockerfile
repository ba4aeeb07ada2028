# msgapi: multi-stage build of cmd/msgapi into a static, non-root image.
#
# Base images are pinned by digest (a tag can be moved; a digest cannot).
# The build stage's Go is the exact toolchain go.mod asks for.
FROM golang:1.26.8-bookworm@sha256:dc9ad6c05acc7a88e5b71bde60a5fe3bd4b9f0db209011711b464107438a8107 AS build
WORKDIR /src
COPY go.mod go.sum ./
# The embedded engine (FerretDB, patched: third_party/ferretdb/PATCHES.md) is
# a local module that go.mod replaces; download needs it in place.
COPY third_party/ ./third_party/
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/msgapi ./cmd/msgapi
# The embedded engine's data folder, owned by the runtime user (distroless
# "nonroot" is uid/gid 65532), which could not create /data itself.
RUN mkdir -p /out/data && chown 65532:65532 /out/data && chmod 0750 /out/data

FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
COPY --from=build /out/msgapi /usr/local/bin/msgapi
COPY --from=build --chown=65532:65532 /out/data /data
USER nonroot:nonroot
ENV MSGAPI_ADDR=:8080 MSGAPI_DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 8080
# No shell or curl in the image: the binary asks its own /readyz.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["/usr/local/bin/msgapi", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/msgapi"]
CMD ["serve"]
