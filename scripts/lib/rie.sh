# shellcheck shell=bash
# Sourced by scripts/lib/bootstrap.sh: the AWS Lambda Runtime Interface Emulator (the local stack
# runs every function under it, scripts/stack). Built once from its Go module through the Go
# module proxy with the Go toolchain, into the engine cache next to the OpenSearch node:
#
#   $FM_RIE_BIN   ~/.cache/fleetmem/engines/aws-lambda-rie-<version>/aws-lambda-rie
#
# The module has no release tags, so the version is a pinned pseudo-version (commit date + hash).

FM_RIE_MODULE="github.com/aws/aws-lambda-runtime-interface-emulator"
FM_RIE_VERSION="v0.0.0-20261030222936-bef5c4ba774d"
FM_RIE_DIR="${FLEETMEM_RIE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/fleetmem/engines/aws-lambda-rie-$FM_RIE_VERSION}"
FM_RIE_BIN="$FM_RIE_DIR/aws-lambda-rie"

fm_go() {
  local go
  for go in "${FLEETMEM_GO:-}" /usr/local/go/bin/go "$(command -v go 2>/dev/null || true)"; do
    if [ -n "$go" ] && [ -x "$go" ]; then
      echo "$go"
      return 0
    fi
  done
  return 1
}

# fm_ensure_rie — the emulator binary in the cache (built once; needs the Go toolchain). A failure
# is reported, not fatal here: the local-stack test then fails under CI=true and skips locally.
fm_ensure_rie() {
  local go build
  [ -x "$FM_RIE_BIN" ] && return 0
  if ! go="$(fm_go)"; then
    fm_log "go not found: cannot build the Lambda Runtime Interface Emulator (install Go >= 1.26)"
    return 0
  fi
  fm_log "building the Lambda Runtime Interface Emulator $FM_RIE_VERSION with $go (once)"
  mkdir -p "$(dirname "$FM_RIE_DIR")"
  build="$(mktemp -d "$(dirname "$FM_RIE_DIR")/.rie.XXXXXX")"
  if GOBIN="$build" GOFLAGS=-mod=mod "$go" install "$FM_RIE_MODULE/cmd/aws-lambda-rie@$FM_RIE_VERSION" >&2; then
    rm -rf "$FM_RIE_DIR"
    mkdir -p "$FM_RIE_DIR"
    mv "$build/aws-lambda-rie" "$FM_RIE_BIN"
    rm -rf "$build"
  else
    rm -rf "$build"
    fm_log "building the Lambda Runtime Interface Emulator failed; the local stack will report it"
  fi
}
