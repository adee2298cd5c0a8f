#!/usr/bin/env bash
# A throwaway PostgreSQL 15 + pgvector server for the test suite (Debian bookworm, as root or as a user).
#
#   pg_env=$(bash .ci/postgres.sh start)      install what is missing, start a cluster on 127.0.0.1 and print
#   eval "$pg_env"                            the exports the tests read (MEMLANE_TEST_POSTGRES_URL, ...);
#                                             (an assignment first, so that `set -e` sees a failed start)
#   bash .ci/postgres.sh start _SUFFIX        another, independent server whose exports end in the suffix
#                                             (MEMLANE_TEST_POSTGRES_URL_SUFFIX, MEMLANE_TEST_PG_DIR_SUFFIX, ...):
#                                             how .ci/citus.sh starts the nodes of its cluster (_CITUS_C, _CITUS_W1,
#                                             _CITUS_W2); .ci/run starts one server without a suffix
#   bash .ci/postgres.sh stop "$MEMLANE_TEST_PG_DIR"   stop that cluster and remove its folder
#   bash .ci/postgres.sh install              only install (PostgreSQL 15, then pgvector built from source)
#
# MEMLANE_PG_CONF, if set, holds extra postgresql.conf lines for the server started (.ci/citus.sh preloads
# Citus with it).
#
# Every install step checks before it acts, so the script works on a fresh machine and on one where
# everything is already there. Only the exports go to stdout; progress goes to stderr.
set -euo pipefail

PG_MAJOR=15
PG_BIN=/usr/lib/postgresql/$PG_MAJOR/bin
PG_SHARE=/usr/share/postgresql/$PG_MAJOR
PG_LIB=/usr/lib/postgresql/$PG_MAJOR/lib
DB_NAME=memlane_test

log() { echo "postgres.sh: $*" >&2; }
is_root() { [ "$(id -u)" = 0 ]; }

APT_UPDATED=0
apt_install() {
    is_root || { log "missing $*; install as root (apt-get install $*)"; exit 1; }
    export DEBIAN_FRONTEND=noninteractive
    if [ "$APT_UPDATED" = 0 ]; then
        apt-get update -qq >&2
        APT_UPDATED=1
    fi
    log "apt-get install $*"
    apt-get install -y -qq --no-install-recommends "$@" >&2
}

install_postgres() {
    if [ -x "$PG_BIN/postgres" ] && [ -x "$PG_BIN/initdb" ] && [ -x "$PG_BIN/pg_ctl" ] && [ -x "$PG_BIN/psql" ]; then
        return
    fi
    apt_install "postgresql-$PG_MAJOR" "postgresql-client-$PG_MAJOR"
}

debian_mirror() {
    # The machine's own mirror, from the deb822 sources or the one-line list.
    local uri=""
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        uri=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources)
    fi
    if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
        uri=$(awk '$1 == "deb" && $0 ~ / main/ {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' \
            /etc/apt/sources.list)
    fi
    [ -n "$uri" ] || { log "no Debian mirror found in /etc/apt/sources.list(.d); cannot fetch pgvector's source"; exit 1; }
    echo "$uri"
}

install_pgvector() {
    if [ -f "$PG_SHARE/extension/vector.control" ] && [ -f "$PG_LIB/vector.so" ]; then
        return
    fi
    # Bookworm has no pgvector package: build Debian trixie's source package against PG 15.
    local need=()
    [ -f "/usr/include/postgresql/$PG_MAJOR/server/postgres.h" ] || need+=("postgresql-server-dev-$PG_MAJOR")
    command -v make >/dev/null || need+=(make)
    command -v gcc >/dev/null || need+=(gcc libc6-dev)
    [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || need+=(debian-archive-keyring)
    [ ${#need[@]} = 0 ] || apt_install "${need[@]}"
    is_root || { log "pgvector is missing; run this script as root once to build it"; exit 1; }
    local tmp
    tmp=$(mktemp -d)
    # A private apt state for the trixie deb-src entry: the machine's own sources and lists stay untouched.
    mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial" "$tmp/parts" "$tmp/src"
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(debian_mirror) trixie main" \
        >"$tmp/trixie.list"
    local opts=(-o "Dir::Etc::SourceList=$tmp/trixie.list" -o "Dir::Etc::SourceParts=$tmp/parts"
        -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache" -o "APT::Sandbox::User=root")
    log "fetching the pgvector source package from trixie"
    apt-get "${opts[@]}" update -qq >&2
    (cd "$tmp/src" && apt-get "${opts[@]}" source --download-only -qq pgvector >&2)
    tar -xf "$tmp"/src/pgvector_*.orig.tar.* -C "$tmp/src"
    local srcdir
    srcdir=$(find "$tmp/src" -mindepth 1 -maxdepth 1 -type d -name 'pgvector-*' | head -n 1)
    log "building $(basename "$srcdir")"
    # OPTFLAGS="" builds portable code (as Debian does) instead of -march=native.
    make -s -C "$srcdir" -j"$(nproc)" OPTFLAGS="" PG_CONFIG="$PG_BIN/pg_config" >&2
    make -s -C "$srcdir" install PG_CONFIG="$PG_BIN/pg_config" >&2
    rm -rf "$tmp"
}

as_owner() {
    # The server refuses to run as root: run its tools as the postgres user then.
    if is_root; then runuser -u postgres -- "$@"; else "$@"; fi
}

# The first port tried (then upwards). Ports in the kernel's range for outgoing connections are skipped: an
# outgoing connection's socket may hold one at any time, which a connect probe cannot see and which makes the
# server's bind fail ("could not bind IPv4 address ... Address already in use").
PORT_BASE=${MEMLANE_PG_PORT_BASE:-15432}
PORT_TRIES=200

ephemeral_range() {
    cat /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo "32768 60999"
}

can_bind() {
    # What the server will do: bind 127.0.0.1:PORT with SO_REUSEADDR (so a TIME_WAIT socket does not count).
    python3 -c 'import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))' "$1" 2>/dev/null
}

free_port() {
    # The first of PORT_TRIES ports from $1 up that lies outside the ephemeral range and can be bound now.
    local p=$1 tried=0 lo hi
    read -r lo hi <<<"$(ephemeral_range)"
    while [ "$p" -le 65535 ] && [ "$tried" -lt "$PORT_TRIES" ]; do
        if [ "$p" -ge "$lo" ] && [ "$p" -le "$hi" ]; then
            p=$((hi + 1))
            continue
        fi
        if can_bind "$p"; then
            echo "$p"
            return
        fi
        p=$((p + 1))
        tried=$((tried + 1))
    done
    log "no port from $1 up, outside the ephemeral range $lo-$hi, could be bound"
    exit 1
}

start() {
    local suffix=${1:-}
    case "$suffix" in
    "" | _[0-9A-Za-z]*) ;;
    *) log "the suffix of the exports starts with _ (start _CITUS_W1), not '$suffix'"; exit 2 ;;
    esac
    install_postgres
    install_pgvector
    local dir port
    dir=$(mktemp -d "${TMPDIR:-/tmp}/memlane-pg.XXXXXX")
    if is_root; then chown postgres: "$dir"; fi
    chmod 700 "$dir"
    as_owner "$PG_BIN/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --no-locale --no-sync >/dev/null
    # Settings live in the data folder, so a test can restart the server with `pg_ctl -D DATA start` alone.
    # fsync off is for speed only: commits still reach the kernel before they are acknowledged, so an
    # immediate shutdown (a server crash, not a power cut) loses nothing acknowledged.
    cat >>"$dir/data/postgresql.conf" <<EOF
port = 0
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
fsync = off
max_connections = 200
shared_buffers = 256MB
${MEMLANE_PG_CONF:-}
EOF
    # A port free when probed may be taken before the server binds it (another start, a client socket):
    # then the next one is tried.
    local attempt next=$PORT_BASE
    for attempt in 1 2 3 4 5; do
        port=$(free_port "$next") || { stop "$dir"; exit 1; }
        sed -i "s/^port = [0-9]*\$/port = $port/" "$dir/data/postgresql.conf"
        rm -f "$dir/server.log"
        if as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null; then
            break
        fi
        if [ "$attempt" -lt 5 ] && grep -q "could not bind\|could not create any TCP/IP sockets" "$dir/server.log"; then
            log "port $port was taken before the server could bind it; trying the next one"
            next=$((port + 1))
            continue
        fi
        cat "$dir/server.log" >&2
        stop "$dir"
        exit 1
    done
    # A server that started but could not be set up is stopped again: nothing is left running.
    if ! as_owner "$PG_BIN/psql" -h "$dir" -p "$port" -U postgres -d postgres -qAt -v ON_ERROR_STOP=1 \
        -c "CREATE DATABASE $DB_NAME" >/dev/null ||
        ! as_owner "$PG_BIN/psql" -h "$dir" -p "$port" -U postgres -d "$DB_NAME" -qAt -v ON_ERROR_STOP=1 \
            -c "CREATE EXTENSION IF NOT EXISTS vector" >/dev/null; then
        stop "$dir"
        exit 1
    fi
    log "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') with pgvector on 127.0.0.1:$port ($dir)"
    echo "export MEMLANE_TEST_POSTGRES_URL$suffix=postgresql://postgres@127.0.0.1:$port/$DB_NAME"
    echo "export MEMLANE_TEST_PG_DIR$suffix=$dir"
    echo "export MEMLANE_TEST_PG_DATA$suffix=$dir/data"
    echo "export MEMLANE_TEST_PG_CTL$suffix=$PG_BIN/pg_ctl"
}

stop() {
    local dir=${1:-${MEMLANE_TEST_PG_DIR:-}}
    [ -n "$dir" ] || { log "usage: postgres.sh stop DIR"; exit 2; }
    if [ -f "$dir/data/postmaster.pid" ]; then
        as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null || true
    fi
    case "$dir" in
    */memlane-pg.*) rm -rf "$dir" ;;
    *) log "not removing $dir: not a folder this script made" ;;
    esac
}

case "${1:-}" in
start) start "${2:-}" ;;
stop) stop "${2:-}" ;;
install)
    install_postgres
    install_pgvector
    ;;
*)
    echo "usage: $0 start [_SUFFIX] | stop DIR | install" >&2
    exit 2
    ;;
esac
