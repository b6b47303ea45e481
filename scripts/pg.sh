#!/usr/bin/env bash
# A throwaway PostgreSQL 15 server for trying a shared store (several memfs
# hosts on one machine), and for the tests.
#
#   scripts/pg.sh start DIR [PORT]   initdb in DIR (if new), start on 127.0.0.1:PORT
#                                    (default 54329), print the URL to use
#   scripts/pg.sh stop DIR           stop it (fast)
#   scripts/pg.sh kill DIR           stop it the way a crash would (-m immediate)
#
# PG_LISTEN sets the addresses it listens on (default 127.0.0.1).
# The server trusts local connections: it is for trying things, not for
# keeping anything. Run as root, it runs the server as the user postgres.
set -euo pipefail
cmd=${1:?usage: scripts/pg.sh start|stop|kill DIR [PORT]}
dir=${2:?usage: scripts/pg.sh start|stop|kill DIR [PORT]}
port=${3:-54329}
bin=/usr/lib/postgresql/15/bin
[ -x "$bin/pg_ctl" ] || bin=$(dirname "$(command -v pg_ctl)")
as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
case "$cmd" in
start)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    if [ ! -f "$dir/PG_VERSION" ]; then
        as_owner "$bin/initdb" -D "$dir" -U postgres -A trust --no-sync >"$dir/../pg-initdb.log" 2>&1 ||
            { cat "$dir/../pg-initdb.log" >&2; exit 1; }
    fi
    as_owner "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 \
        -o "-p $port -k $dir -c listen_addresses=${PG_LISTEN:-127.0.0.1} -c fsync=on -c max_connections=200" start >/dev/null
    echo "postgres://postgres@127.0.0.1:$port/postgres"
    ;;
stop) as_owner "$bin/pg_ctl" -D "$dir" -m fast -w stop >/dev/null ;;
kill) as_owner "$bin/pg_ctl" -D "$dir" -m immediate -w stop >/dev/null ;;
*) echo "usage: scripts/pg.sh start|stop|kill DIR [PORT]" >&2; exit 2 ;;
esac
