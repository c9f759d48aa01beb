// A peer for chargeonce's bench/peers: NestJS 10 on Fastify with
// @node-idempotency/nestjs (its interceptor, through the @Idempotent()
// decorator, as its README shows) in front of a do-nothing POST /v1/payments.
//
//   node main.js memory|redis|postgres 127.0.0.1:PORT
//
// Environment: REDIS_URL (redis://127.0.0.1:6379/11) for `redis`;
// DATABASE_URL and PG_POOL (32) for `postgres` (postgres-storage.js: a
// LOGGED table, created if missing);
// KEY_PREFIX (node-idempotency) prefixes every key the library stores, so the
// caller can delete what a run left without touching anything else;
// CACHE_TTL_MS (3600000) how long a key is kept.
//
// Plain JavaScript: the decorators are applied with Reflect.decorate, which is
// what TypeScript compiles them to.
"use strict";

require("reflect-metadata");
const { Module, Controller, Post, Get, HttpCode } = require("@nestjs/common");
const { NestFactory } = require("@nestjs/core");
const { FastifyAdapter } = require("@nestjs/platform-fastify");
const { NodeIdempotencyModule, Idempotent } = require("@node-idempotency/nestjs");
const { PostgresStorageAdapter } = require("./postgres-storage");

const [adapter, listen] = process.argv.slice(2);
if (!["memory", "redis", "postgres"].includes(adapter) || !/^[^:]+:\d+$/.test(listen || "")) {
    console.error("usage: node main.js memory|redis|postgres HOST:PORT");
    process.exit(2);
}
const [host, port] = listen.split(":");

let payments = 0;

class PaymentsController {
    // The same do-nothing handler as the Rust peers: 201 and a small JSON body
    // whose id comes from a counter, so a second execution would show.
    create() {
        payments += 1;
        return { id: `pay_${payments}`, object: "payment", status: "succeeded" };
    }

    health() {
        return "ok";
    }
}
Reflect.decorate([Controller()], PaymentsController);
const method = (name) => Object.getOwnPropertyDescriptor(PaymentsController.prototype, name);
Reflect.decorate(
    [Post("v1/payments"), HttpCode(201), Idempotent()],
    PaymentsController.prototype,
    "create",
    method("create"),
);
Reflect.decorate([Get("healthz")], PaymentsController.prototype, "health", method("health"));

// The library builds and connects its own memory and Redis adapters; a
// Storage of one's own is passed built (it connects it in main, below).
const postgres =
    adapter === "postgres"
        ? new PostgresStorageAdapter({
              url: process.env.DATABASE_URL,
              max: Number(process.env.PG_POOL || 32),
          })
        : null;
const storage =
    adapter === "redis"
        ? { adapter: "redis", options: { url: process.env.REDIS_URL || "redis://127.0.0.1:6379/11" } }
        : postgres
          ? { adapter: postgres }
          : { adapter: "memory" };

class AppModule {}
Reflect.decorate(
    [
        Module({
            imports: [
                NodeIdempotencyModule.forRootAsync({
                    storage,
                    cacheKeyPrefix: process.env.KEY_PREFIX || "node-idempotency",
                    cacheTTLMS: Number(process.env.CACHE_TTL_MS || 3600000),
                }),
            ],
            controllers: [PaymentsController],
        }),
    ],
    AppModule,
);

async function main() {
    if (postgres) {
        await postgres.connect();
    }
    const app = await NestFactory.create(AppModule, new FastifyAdapter(), {
        logger: ["error", "warn"],
    });
    app.enableShutdownHooks();
    await app.listen(Number(port), host);
    console.log(`nestjs peer (${adapter}) listening on http://${host}:${port}`);
}

main().catch((error) => {
    console.error(error);
    process.exit(1);
});
