#!/usr/bin/env bash
# A throwaway Citus cluster (one coordinator, two workers, PostgreSQL 15 + pgvector + Citus) on 127.0.0.1.
#
#   citus_env=$(bash .ci/citus.sh start)      build Citus if this machine has not yet, start the three servers,
#   eval "$citus_env"                         join them, and print the exports the tests read:
#                                               MEMLANE_TEST_CITUS_URL          the coordinator (memlane's URL)
#                                               MEMLANE_TEST_CITUS_WORKER_URLS  the workers, comma-separated
#                                               MEMLANE_TEST_CITUS_WORKER_DATA  their data folders, likewise
#                                               MEMLANE_TEST_CITUS_DIR          what `stop` takes
#                                               MEMLANE_TEST_PG_CTL_CITUS       pg_ctl, to restart a node
#   bash .ci/citus.sh stop "$MEMLANE_TEST_CITUS_DIR"   stop the three servers and remove their folders
#   bash .ci/citus.sh install                 only install (PostgreSQL, pgvector, then Citus from source)
#
# Citus is in no package registry these machines reach: it is built from the release archive in
# MEMLANE_CITUS_SRC (default: shared/vendor/citus beside the repository's folder), once per machine. The
# build is skipped when the installed extension came from the same archive (a stamp beside citus.so holds
# its sha256). Each node is a server from .ci/postgres.sh with Citus preloaded. Only the exports go to
# stdout; progress goes to stderr.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
PG_MAJOR=15
PG_BIN=/usr/lib/postgresql/$PG_MAJOR/bin
PG_LIB=/usr/lib/postgresql/$PG_MAJOR/lib
PG_SHARE=/usr/share/postgresql/$PG_MAJOR
DB_NAME=memlane_test
CITUS_SRC=${MEMLANE_CITUS_SRC:-$HERE/../../shared/vendor/citus}
CITUS_VERSION=13.2.2
STAMP=$PG_LIB/citus.memlane-build
# Shards per distributed table in this test cluster: few, so that a test's fresh schema is distributed
# quickly; memlane's own default for a real cluster is Citus's (32), chosen by the operator.
TEST_SHARD_COUNT=${MEMLANE_CITUS_SHARD_COUNT:-4}

log() { echo "citus.sh: $*" >&2; }
is_root() { [ "$(id -u)" = 0 ]; }
as_owner() { if is_root; then runuser -u postgres -- "$@"; else "$@"; fi; }

archive() {
    local tarball=$CITUS_SRC/citus-$CITUS_VERSION.tar.gz
    [ -f "$tarball" ] || {
        log "no Citus source at $tarball: set MEMLANE_CITUS_SRC to the folder holding citus-$CITUS_VERSION.tar.gz"
        exit 1
    }
    echo "$tarball"
}

install_citus() {
    bash "$HERE/postgres.sh" install
    local tarball sum
    tarball=$(archive)
    sum=$(sha256sum "$tarball" | awk '{print $1}')
    if [ -f "$PG_LIB/citus.so" ] && [ -f "$PG_SHARE/extension/citus.control" ] && [ -f "$STAMP" ] &&
        [ "$(cat "$STAMP")" = "$sum" ]; then
        return
    fi
    is_root || { log "Citus is not installed; run this script as root once to build it"; exit 1; }
    local need=() pkg
    for pkg in "postgresql-server-dev-$PG_MAJOR" liblz4-dev libzstd-dev libkrb5-dev make gcc libc6-dev patch; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
    done
    if [ ${#need[@]} -gt 0 ]; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        log "apt-get install ${need[*]}"
        apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
    fi
    local tmp started
    tmp=$(mktemp -d)
    started=$(date +%s)
    log "building Citus $CITUS_VERSION from $(basename "$tarball") (once per machine)"
    tar -xzf "$tarball" -C "$tmp"
    local src=$tmp/citus-$CITUS_VERSION
    # PostgreSQL 15.20's headers declare have_createdb_privilege(), which this release also defines.
    for fix in "$CITUS_SRC"/*.patch; do
        [ -f "$fix" ] && patch -s -d "$src" -p1 <"$fix" >&2
    done
    # No libcurl: Citus then sends no usage statistics anywhere. Built under nice: the machine is shared.
    (cd "$src" && ./configure -q --without-libcurl PG_CONFIG="$PG_BIN/pg_config" >&2 &&
        nice -n 10 make -s -j"$(nproc)" >&2 && make -s install >&2)
    echo "$sum" >"$STAMP"
    rm -rf "$tmp"
    log "Citus $CITUS_VERSION built and installed in $(($(date +%s) - started)) s"
}

node_conf() {
    # wal_level logical: Citus moves and splits shards online over logical replication. A split decodes
    # with Citus's own output plugin, which Debian's PostgreSQL allows only when listed. An online copy that
    # stops making progress fails after a minute instead of Citus's two hours.
    cat <<EOF
shared_preload_libraries = 'citus'
wal_level = logical
output_plugin_libraries = 'pgoutput, test_decoding, citus'
max_replication_slots = 20
max_wal_senders = 20
max_worker_processes = 32
citus.shard_count = $TEST_SHARD_COUNT
citus.logical_replication_timeout = 60000
EOF
}

psql_at() {
    # psql_at URL SQL: run SQL on a node, stop at the first error.
    as_owner "$PG_BIN/psql" "$1" -qAt -v ON_ERROR_STOP=1 -c "$2"
}

start_node() {
    # start_node SUFFIX: one server from postgres.sh with Citus preloaded; prints its exports.
    MEMLANE_PG_CONF=$(node_conf) bash "$HERE/postgres.sh" start "$1"
}

var() {
    # var EXPORTS NAME: the value NAME is given in postgres.sh's export lines.
    sed -n "s/^export $2=//p" <<<"$1"
}

start() {
    install_citus
    local coord w1 w2
    coord=$(start_node _CITUS_C)
    local cdir curl
    cdir=$(var "$coord" MEMLANE_TEST_PG_DIR_CITUS_C)
    curl=$(var "$coord" MEMLANE_TEST_POSTGRES_URL_CITUS_C)
    # From here on, a failure stops every server already started.
    trap 'stop "$cdir"' ERR
    : >"$cdir/citus-workers"
    w1=$(start_node _CITUS_W1)
    var "$w1" MEMLANE_TEST_PG_DIR_CITUS_W1 >>"$cdir/citus-workers"
    w2=$(start_node _CITUS_W2)
    var "$w2" MEMLANE_TEST_PG_DIR_CITUS_W2 >>"$cdir/citus-workers"
    local node url port urls=() datas=()
    for node in "$coord" "$w1" "$w2"; do
        url=$(sed -n 's/^export MEMLANE_TEST_POSTGRES_URL_CITUS_[A-Z0-9]*=//p' <<<"$node")
        psql_at "$url" "CREATE EXTENSION IF NOT EXISTS citus" >/dev/null
    done
    port=$(sed 's/.*:\([0-9]*\)\/.*/\1/' <<<"$curl")
    psql_at "$curl" "SELECT citus_set_coordinator_host('127.0.0.1', $port)" >/dev/null
    for node in "$w1" "$w2"; do
        url=$(sed -n 's/^export MEMLANE_TEST_POSTGRES_URL_CITUS_[A-Z0-9]*=//p' <<<"$node")
        port=$(sed 's/.*:\([0-9]*\)\/.*/\1/' <<<"$url")
        psql_at "$curl" "SELECT citus_add_node('127.0.0.1', $port)" >/dev/null
        urls+=("$url")
        datas+=("$(sed -n 's/^export MEMLANE_TEST_PG_DATA_CITUS_[A-Z0-9]*=//p' <<<"$node")")
    done
    trap - ERR
    log "Citus $(psql_at "$curl" "SELECT extversion FROM pg_extension WHERE extname = 'citus'") coordinator" \
        "$curl, workers ${urls[*]}"
    echo "export MEMLANE_TEST_CITUS_URL=$curl"
    echo "export MEMLANE_TEST_CITUS_WORKER_URLS=$(IFS=,; echo "${urls[*]}")"
    echo "export MEMLANE_TEST_CITUS_WORKER_DATA=$(IFS=,; echo "${datas[*]}")"
    echo "export MEMLANE_TEST_CITUS_DIR=$cdir"
    echo "export MEMLANE_TEST_PG_CTL_CITUS=$PG_BIN/pg_ctl"
}

stop() {
    local dir=${1:-${MEMLANE_TEST_CITUS_DIR:-}}
    [ -n "$dir" ] || { log "usage: citus.sh stop DIR"; exit 2; }
    local worker
    if [ -f "$dir/citus-workers" ]; then
        while read -r worker; do
            [ -n "$worker" ] && bash "$HERE/postgres.sh" stop "$worker"
        done <"$dir/citus-workers"
    fi
    bash "$HERE/postgres.sh" stop "$dir"
}

case "${1:-}" in
start) start ;;
stop) stop "${2:-}" ;;
install) install_citus ;;
*)
    echo "usage: $0 start | stop DIR | install" >&2
    exit 2
    ;;
esac
