// A @node-idempotency StorageAdapter on PostgreSQL, for bench/peers'
// `nestjs-postgres`: the durable peer issue 38 measures chargeonce against.
//
// @node-idempotency publishes no PostgreSQL adapter (only memory and Redis;
// its docs say to write a Storage of one's own), so this is the one a user
// would write with node-postgres: a LOGGED table, one row a key, the same
// three calls as the Redis adapter with the same meaning:
//
//   setIfNotExists  INSERT of the in-progress record; a row whose TTL has
//                   passed counts as absent (Redis SET NX PX), so it is
//                   taken over in the same statement;
//   set             the answer written over it (Redis SET PX);
//   get             the record, unless its TTL has passed.
//
// Each call is one autocommitted statement: a fresh request is one insert
// and one update, two commits, as chargeonce's fresh payment is two.
"use strict";

const { Pool } = require("pg");

const TABLE = "node_idempotency";

class PostgresStorageAdapter {
    // url: a libpq connection string; max: the pool's size.
    constructor({ url, max }) {
        // bench/lib/pg.sh sets PGSSLMODE for every client of a figure. With
        // `require` (or `prefer`) libpq and sqlx encrypt without checking the
        // certificate, and node-postgres would check it: say so, so that the
        // peer connects as the others do. Otherwise node-postgres reads
        // PGSSLMODE itself (`disable`: plain TCP).
        const mode = process.env.PGSSLMODE;
        const ssl = mode === "require" || mode === "prefer" ? { rejectUnauthorized: false } : undefined;
        this.pool = new Pool({ connectionString: url, max, ssl });
        this.pool.on("error", (err) => console.error("postgres pool error", err));
    }

    async connect() {
        await this.pool.query(
            `CREATE TABLE IF NOT EXISTS ${TABLE} (
                 key TEXT PRIMARY KEY,
                 value TEXT NOT NULL,
                 expires_at TIMESTAMPTZ NOT NULL)`,
        );
    }

    async disconnect() {
        await this.pool.end();
    }

    async setIfNotExists(key, val, { ttl } = {}) {
        const { rowCount } = await this.pool.query({
            name: "idempotency-set-if-absent",
            text: `INSERT INTO ${TABLE} (key, value, expires_at)
                   VALUES ($1, $2, now() + $3 * interval '1 millisecond')
                   ON CONFLICT (key) DO UPDATE
                       SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at
                       WHERE ${TABLE}.expires_at <= now()`,
            values: [key, val, ttlOf(ttl)],
        });
        return rowCount === 1;
    }

    async set(key, val, { ttl } = {}) {
        await this.pool.query({
            name: "idempotency-set",
            text: `INSERT INTO ${TABLE} (key, value, expires_at)
                   VALUES ($1, $2, now() + $3 * interval '1 millisecond')
                   ON CONFLICT (key) DO UPDATE
                       SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at`,
            values: [key, val, ttlOf(ttl)],
        });
    }

    async get(key) {
        const { rows } = await this.pool.query({
            name: "idempotency-get",
            text: `SELECT value FROM ${TABLE} WHERE key = $1 AND expires_at > now()`,
            values: [key],
        });
        return rows.length === 1 ? rows[0].value : undefined;
    }
}

// No TTL: kept for a year (Redis would keep it forever).
function ttlOf(ttl) {
    return Number.isFinite(ttl) && ttl > 0 ? ttl : 365 * 24 * 3600 * 1000;
}

module.exports = { PostgresStorageAdapter };
