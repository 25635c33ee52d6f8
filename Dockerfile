# sluice — a rate limiter that speaks RESP, in front of a Redis Cluster.
#
#   docker build -t sluice .
#   docker run --rm -p 127.0.0.1:6380:6380 -p 127.0.0.1:9380:9380 sluice \
#     serve --listen 0.0.0.0:6380 --admin 0.0.0.0:9380 --cluster redis-1:7001,redis-2:7002
#
# Without --cluster or --redis, sluice runs embedded (limits per process).

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# docker build --build-arg VERSION=1.2.3 stamps `sluice version`.
ARG VERSION
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w ${VERSION:+-X main.version=$VERSION}" -o /sluice ./cmd/sluice

# Static binary, no shell and no package manager; runs as uid 65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /sluice /sluice
USER nonroot:nonroot
# 6380: RESP (RL.TAKE …); 9380: admin HTTP (/metrics, /healthz, /readyz).
# Profiling (/debug/pprof) is off; --pprof ADDR serves it on a listener of
# its own (docs/operations.md).
EXPOSE 6380 9380
ENTRYPOINT ["/sluice"]
CMD ["serve", "--listen", "0.0.0.0:6380", "--admin", "0.0.0.0:9380"]
