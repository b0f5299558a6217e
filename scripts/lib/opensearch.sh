# shellcheck shell=bash
# Sourced by scripts/lib/bootstrap.sh: assemble a single-node OpenSearch with the k-NN plugin from
# Maven Central artifacts only (no tarball host, no Docker), the search engine of the AWS adapter
# tests. The result is an OpenSearch home in the cache, reused by every later run:
#
#   $FM_OPENSEARCH_HOME/lib/                   core org.opensearch:opensearch and its runtime jars
#   $FM_OPENSEARCH_HOME/modules/<name>/        transport-netty4, lang-painless, analysis-common, reindex
#   $FM_OPENSEARCH_HOME/plugins/opensearch-knn the org.opensearch.plugin:opensearch-knn zip, unpacked
#   $FM_OPENSEARCH_HOME/config/                opensearch.yml, log4j2.properties (copied per start)
#
# Maven publishes the modules as plain jars, so their plugin-descriptor.properties and security
# policies (the ones the OpenSearch build puts into its distribution) are written here. The k-NN
# zip brings its own. tests/aws/engines.py starts the node (java -cp 'lib/*' ... OpenSearch).

FM_OPENSEARCH_VERSION="2.19.1"
FM_OPENSEARCH_KNN_VERSION="2.19.1.0"
# bumped when the assembly changes, so a cached home of an older recipe is rebuilt
FM_OPENSEARCH_RECIPE="$FM_OPENSEARCH_VERSION knn=$FM_OPENSEARCH_KNN_VERSION recipe=2"
FM_OPENSEARCH_HOME="${FLEETMEM_OPENSEARCH_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/fleetmem/engines/opensearch-$FM_OPENSEARCH_VERSION}"

_fm_os_pom() { # _fm_os_pom GROUP ARTIFACT VERSION [EXTRA_DEPENDENCY_XML]
  cat <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>fleetmem.engines</groupId><artifactId>fetch-$2</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>$1</groupId><artifactId>$2</artifactId><version>$3</version></dependency>${4:-}
  </dependencies>
</project>
EOF
}

# _fm_os_copy_deps DIR OUT: the runtime closure of the pom in DIR, as jars in OUT.
_fm_os_copy_deps() {
  (cd "$1" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$2") >&2
}

_fm_os_module() { # _fm_os_module BUILD NAME ARTIFACT CLASSNAME DESCRIPTION [EXTENDED]
  local build="$1" name="$2" artifact="$3" classname="$4" description="$5" extended="${6:-}"
  local work="$build/fetch/$name" dest="$build/home/modules/$name" jar
  mkdir -p "$work" "$dest"
  _fm_os_pom org.opensearch.plugin "$artifact" "$FM_OPENSEARCH_VERSION" >"$work/pom.xml"
  _fm_os_copy_deps "$work" "$work/jars"
  # core jars are on the node's classpath already: a second copy fails the jar-hell check
  for jar in "$work"/jars/*.jar; do
    [ -e "$build/home/lib/$(basename "$jar")" ] || cp "$jar" "$dest/"
  done
  cat >"$dest/plugin-descriptor.properties" <<EOF
description=$description
version=$FM_OPENSEARCH_VERSION
name=$name
classname=$classname
java.version=11
opensearch.version=$FM_OPENSEARCH_VERSION
extended.plugins=$extended
has.native.controller=false
EOF
}

_fm_os_assemble() { # _fm_os_assemble BUILD
  local build="$1" home="$1/home"
  mkdir -p "$build/fetch/core" "$home/lib" "$home/plugins" "$home/config"
  # log4j-core (what the distribution logs with) and the plugin class loader are added by the
  # distribution's packaging, not by the core pom
  _fm_os_pom org.opensearch opensearch "$FM_OPENSEARCH_VERSION" "
    <dependency><groupId>org.opensearch</groupId><artifactId>opensearch-plugin-classloader</artifactId><version>$FM_OPENSEARCH_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>2.21.0</version></dependency>" \
    >"$build/fetch/core/pom.xml"
  _fm_os_copy_deps "$build/fetch/core" "$home/lib"

  _fm_os_module "$build" transport-netty4 transport-netty4-client org.opensearch.transport.Netty4Plugin \
    "Netty 4 based transport implementation"
  cat >"$home/modules/transport-netty4/plugin-security.policy" <<'EOF'
grant codeBase "${codebase.netty-common}" {
  permission java.io.FilePermission "/proc/sys/net/core/somaxconn", "read";
  permission java.net.SocketPermission "*", "accept,connect";
  permission java.lang.RuntimePermission "*", "setContextClassLoader";
};
grant codeBase "${codebase.netty-transport}" {
  permission java.util.PropertyPermission "sun.nio.ch.bugLevel", "write";
};
EOF
  _fm_os_module "$build" lang-painless lang-painless org.opensearch.painless.PainlessPlugin \
    "An easy, safe and fast scripting language for OpenSearch"
  cat >"$home/modules/lang-painless/plugin-security.policy" <<'EOF'
grant {
  permission java.lang.RuntimePermission "createClassLoader";
  permission java.lang.RuntimePermission "getClassLoader";
};
EOF
  # the index mapping's analyzer uses pattern_replace and asciifolding, which live here
  _fm_os_module "$build" analysis-common analysis-common org.opensearch.analysis.common.CommonAnalysisPlugin \
    "Adds common text analysis to OpenSearch"

  # _delete_by_query (page deletes) is served by the reindex module
  _fm_os_module "$build" reindex reindex-client org.opensearch.index.reindex.ReindexPlugin \
    "The Reindex module adds APIs to reindex from one index to another or update documents in place"
  cat >"$home/modules/reindex/plugin-security.policy" <<'EOF'
grant {
  permission java.net.SocketPermission "*", "connect";
};
grant codeBase "${codebase.opensearch-rest-client}" {
  permission java.net.NetPermission "getProxySelector";
};
grant codeBase "${codebase.httpasyncclient}" {
  permission java.net.NetPermission "getProxySelector";
};
EOF

  mkdir -p "$build/fetch/knn" "$home/plugins/opensearch-knn"
  (cd "$build/fetch/knn" && mvn -q -B -Dstyle.color=never dependency:copy \
    -Dartifact="org.opensearch.plugin:opensearch-knn:$FM_OPENSEARCH_KNN_VERSION:zip" -DoutputDirectory=.) >&2
  (cd "$home/plugins/opensearch-knn" && unzip -q "$build/fetch/knn/opensearch-knn-$FM_OPENSEARCH_KNN_VERSION.zip")

  cat >"$home/config/opensearch.yml" <<'EOF'
# single-node test engine: loopback only, no security plugin installed; ports, paths and heap
# are given at start (tests/aws/engines.py)
cluster.name: fleetmem-test
node.name: fleetmem-test
discovery.type: single-node
network.host: 127.0.0.1
bootstrap.memory_lock: false
cluster.routing.allocation.disk.threshold_enabled: false
EOF
  cat >"$home/config/log4j2.properties" <<'EOF'
status = error
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d{ISO8601}][%-5p][%-25c{1.}] [%node_name]%marker %m%n
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
logger.node.name = org.opensearch.node.Node
logger.node.level = info
logger.plugins.name = org.opensearch.plugins.PluginsService
logger.plugins.level = info
EOF
  echo "$FM_OPENSEARCH_RECIPE" >"$home/.fleetmem-complete"
}

# fm_ensure_opensearch — the OpenSearch home in the cache (assembled once; needs mvn and unzip).
# A failure is reported, not fatal here: the OpenSearch tests then fail under CI=true and skip
# locally with the fix.
fm_ensure_opensearch() {
  local build
  if [ -f "$FM_OPENSEARCH_HOME/.fleetmem-complete" ] &&
    [ "$(cat "$FM_OPENSEARCH_HOME/.fleetmem-complete")" = "$FM_OPENSEARCH_RECIPE" ]; then
    return 0
  fi
  if ! command -v java >/dev/null 2>&1; then
    fm_log "java not found: cannot assemble the OpenSearch test engine"
    return 0
  fi
  if ! command -v mvn >/dev/null 2>&1 || ! command -v unzip >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      fm_log "installing maven and unzip (to fetch the OpenSearch test engine from Maven Central)"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven unzip >/dev/null \
        || { fm_log "could not install maven; the OpenSearch tests will report it"; return 0; }
    else
      fm_log "mvn or unzip not found; the OpenSearch tests will report it (apt-get install maven unzip)"
      return 0
    fi
  fi
  fm_log "assembling OpenSearch $FM_OPENSEARCH_VERSION + k-NN from Maven Central into $FM_OPENSEARCH_HOME (once)"
  mkdir -p "$(dirname "$FM_OPENSEARCH_HOME")"
  build="$(mktemp -d "$(dirname "$FM_OPENSEARCH_HOME")/.assemble.XXXXXX")"
  if _fm_os_assemble "$build"; then
    rm -rf "$FM_OPENSEARCH_HOME"
    mv "$build/home" "$FM_OPENSEARCH_HOME"
    rm -rf "$build"
  else
    rm -rf "$build"
    fm_log "assembling OpenSearch failed; the OpenSearch tests will report it"
  fi
}
