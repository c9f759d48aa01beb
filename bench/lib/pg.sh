# bench/lib/pg.sh: how the bench scripts (bench/run, bench/peers,
# bench/pgframes, bench/ab) connect to PostgreSQL. Sourced, not run.

# Every PostgreSQL client a figure depends on connects the same way: the
# server's pool (sqlx), pgbench and psql (libpq) and the durable peer's pool
# (node-postgres) all read PGSSLMODE. Left to themselves they do not agree:
# sqlx and libpq default to `prefer`, so against a cluster with `ssl = on`
# (Debian's default) they speak TLS, while node-postgres connects in plain
# TCP unless told otherwise. On loopback the bench measures plain TCP for all
# of them (`disable`); PGSSLMODE=require measures them all over TLS, which
# the durable peer then takes without checking the certificate, as libpq's
# `require` does.
export PGSSLMODE=${PGSSLMODE:-disable}

# What machine.txt says of the cluster at PG_ADMIN_URL and of how the clients
# connect to it (bench/run, bench/peers).
pg_described() {
    local q=(psql -Atq "$PG_ADMIN_URL" -c)
    echo "$("${q[@]}" 'show server_version') (fsync $("${q[@]}" 'show fsync'), synchronous_commit $("${q[@]}" 'show synchronous_commit'), ssl $("${q[@]}" 'show ssl'); clients PGSSLMODE=$PGSSLMODE)"
}
