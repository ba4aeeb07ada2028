# msgapi: multi-stage build of cmd/msgapi into a static, non-root image.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/msgapi ./cmd/msgapi

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/msgapi /usr/local/bin/msgapi
USER nonroot:nonroot
ENV MSGAPI_ADDR=:8080 MSGAPI_DATA_DIR=/data
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/msgapi"]
CMD ["serve"]
