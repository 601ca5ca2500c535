// The client's retries, turn ids and errors against a small local HTTP server that answers
// what each test scripts (no Strata needed): run with `node --test` after `npm run build`.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, describe, test } from "node:test";

import { NO_RETRY, parseRetryAfter, RetryPolicy, StrataClient, StrataError }
  from "../dist/index.js";

/** A server whose answers are scripted per test; it records every request it reads. */
function scriptedServer() {
  const seen = [];
  let script = [];
  const server = createServer((req, res) => {
    let raw = "";
    req.on("data", (chunk) => { raw += chunk; });
    req.on("end", () => {
      seen.push({ method: req.method, url: req.url, auth: req.headers.authorization,
                  body: raw ? JSON.parse(raw) : undefined, at: Date.now() });
      const next = script.shift() ?? { status: 200, body: {} };
      if (next.reset) { req.socket.destroy(); return; }  // the request was sent; no answer
      res.writeHead(next.status, { "content-type": "application/json", ...next.headers });
      res.end(typeof next.body === "string" ? next.body : JSON.stringify(next.body));
    });
  });
  return {
    seen,
    answer(...steps) { script = steps; seen.length = 0; },
    listen: () => new Promise((ok) => server.listen(0, "127.0.0.1", ok)),
    close: () => new Promise((ok) => { server.closeAllConnections(); server.close(ok); }),
    url: () => `http://127.0.0.1:${server.address().port}`,
  };
}

const ack = { turn_id: "x", session_id: "s1", turn_count: 1, pinned: false, window_size: 1,
              duplicate: false, intents: { remembered: [], forgotten: [], deferred: false } };
const unavailable = { error: "backend_unavailable", detail: "a session shard is restarting" };

describe("against a scripted server", () => {
  const server = scriptedServer();
  let client;
  before(async () => {
    await server.listen();
    client = new StrataClient({ baseUrl: server.url(), apiKey: "k1",
                                retry: new RetryPolicy({ attempts: 4, backoffMs: 5 }) });
  });
  after(() => server.close());

  test("a 503 is retried after Retry-After, with the same turn_id and the bearer key",
       async () => {
    server.answer({ status: 503, headers: { "retry-after": "1" }, body: unavailable },
                  { status: 200, body: ack });
    const started = Date.now();
    await client.addTurn("s1", "ann", "user", "hello");
    const [first, second] = server.seen;
    assert.equal(server.seen.length, 2);
    assert.ok(second.at - first.at >= 950, `waited ${second.at - first.at} ms, not Retry-After`);
    assert.ok(Date.now() - started < 5000);
    assert.match(first.body.turn_id, /^c-[0-9a-f]{32}$/);
    assert.equal(second.body.turn_id, first.body.turn_id);  // made once, before the first try
    assert.equal(first.auth, "Bearer k1");
    assert.deepEqual(first.body, { user_id: "ann", role: "user", content: "hello",
                                   turn_id: first.body.turn_id });
  });

  test("a batch's turns each get their own id, kept across the retry", async () => {
    server.answer({ status: 503, body: unavailable },
                  { status: 200, body: { session_id: "s1", acks: [ack, ack] } });
    await client.addTurns("s1", "ann", [{ role: "user", content: "a" },
                                         { role: "user", content: "b", turn_id: "mine" }]);
    const [first, second] = server.seen.map((r) => r.body.turns.map((t) => t.turn_id));
    assert.equal(first[1], "mine");
    assert.notEqual(first[0], first[1]);
    assert.deepEqual(second, first);
  });

  test("autoTurnId: false leaves the numbering to the server", async () => {
    server.answer({ status: 200, body: ack });
    await client.addTurn("s1", "ann", "user", "hello", { autoTurnId: false });
    assert.equal("turn_id" in server.seen[0].body, false);
  });

  test("503s until the attempts run out surface the server's error", async () => {
    server.answer(...Array(4).fill({ status: 503, body: unavailable }));
    const error = await client.whoami().catch((e) => e);
    assert.equal(server.seen.length, 4);
    assert.ok(error instanceof StrataError);
    assert.equal(error.status, 503);
    assert.equal(error.code, "backend_unavailable");
    assert.equal(error.detail, unavailable.detail);
  });

  test("a rate limit's 429 is retried after Retry-After; a full scope's 429 is not",
       async () => {
    const limited = { error: "rate_limited", detail: "over 5/s" };
    server.answer({ status: 429, headers: { "retry-after": "1" }, body: limited },
                  { status: 200, body: { memory: {} } });
    await client.remember("ann", { key: "k", value: "v" });  // refused unread: sent again
    assert.equal(server.seen.length, 2);
    assert.ok(server.seen[1].at - server.seen[0].at >= 950);
    server.answer({ status: 429, body: { error: "limit_exceeded", detail: "100 per scope" } });
    const error = await client.remember("ann", { key: "k", value: "v" }).catch((e) => e);
    assert.equal(server.seen.length, 1);
    assert.equal(error.status, 429);
    assert.equal(error.code, "limit_exceeded");
  });

  test("a 4xx is thrown at once with its {error, detail}", async () => {
    server.answer({ status: 422, body: { error: "invalid_input", detail: "a fact needs a value" } });
    const error = await client.remember("ann", { key: "k" }).catch((e) => e);
    assert.equal(server.seen.length, 1);
    assert.equal(error.status, 422);
    assert.equal(error.code, "invalid_input");
    assert.equal(error.message, "422: a fact needs a value");
  });

  test("a 500 that is not Strata's is retried for a read, Strata's own 500 is not", async () => {
    server.answer({ status: 500, body: "<html>proxy</html>" }, { status: 502, body: "bad gateway" },
                  { status: 200, body: { context: "", items: [], route: "x" } });
    await client.recall("ann", "q");
    assert.equal(server.seen.length, 3);
    server.answer({ status: 500, body: { error: "internal_error", detail: "boom" } });
    const error = await client.recall("ann", "q").catch((e) => e);
    assert.equal(server.seen.length, 1);
    assert.equal(error.code, "internal_error");
  });

  test("a connection lost mid-request is retried for a recall, not for a remember",
       async () => {
    server.answer({ reset: true }, { status: 200, body: { context: "", items: [], route: "x" } });
    await client.recall("ann", "q");
    assert.equal(server.seen.length, 2);
    server.answer({ reset: true }, { status: 200, body: {} });
    const error = await client.remember("ann", { key: "k", value: "v" }).catch((e) => e);
    assert.equal(server.seen.length, 1);  // it may have been written: not sent twice
    assert.equal(error.status, null);
    assert.equal(error.code, "backend_unavailable");
  });

  test("a success whose body is not JSON is thrown as it is, not retried", async () => {
    server.answer({ status: 200, body: "<html>a proxy's page</html>" }, { status: 200, body: {} });
    await assert.rejects(client.recall("ann", "q"), SyntaxError);
    assert.equal(server.seen.length, 1);
  });

  test("NO_RETRY and ready() try once", async () => {
    const once = new StrataClient({ baseUrl: server.url(), apiKey: "k1", retry: NO_RETRY });
    server.answer({ status: 503, body: unavailable }, { status: 200, body: ack });
    await assert.rejects(once.addTurn("s1", "ann", "user", "hi"), { status: 503 });
    assert.equal(server.seen.length, 1);
    server.answer({ status: 503, body: { status: "not ready" } }, { status: 200, body: {} });
    await assert.rejects(client.ready(), { status: 503 });
    assert.equal(server.seen.length, 1);
  });

  test("ids are percent-encoded; dot segments and slashes are refused before sending",
       async () => {
    server.answer({ status: 200, body: {} });
    await client.forget("ann smith", "m#1");
    assert.equal(server.seen[0].url, "/v1/users/ann%20smith/memories/m%231");
    server.answer();
    await assert.rejects(client.forget("a", "../../victim"), RangeError);
    await assert.rejects(client.forget("..", "m1"), RangeError);
    await assert.rejects(client.listMemories("a/b"), RangeError);
    assert.equal(server.seen.length, 0);
  });
});

test("a refused connection is retried (never sent), then reported unreachable", async () => {
  const closed = scriptedServer();
  await closed.listen();
  const url = closed.url();
  await closed.close();
  let tries = 0;
  const counting = (...args) => { tries += 1; return fetch(...args); };
  const client = new StrataClient({ baseUrl: url, fetch: counting,
                                    retry: new RetryPolicy({ attempts: 3, backoffMs: 1 }) });
  const error = await client.remember("ann", { key: "k", value: "v" }).catch((e) => e);
  assert.equal(tries, 3);
  assert.ok(error instanceof StrataError);
  assert.equal(error.status, null);
  assert.equal(error.code, "backend_unavailable");
  assert.match(error.message, /cannot reach Strata/);
});

test("Retry-After as seconds or an HTTP date; waits are capped", () => {
  const now = Date.parse("2026-01-01T00:00:00Z");
  assert.equal(parseRetryAfter("3", now), 3000);
  assert.equal(parseRetryAfter("Thu, 01 Jan 2026 00:00:10 GMT", now), 10_000);
  assert.equal(parseRetryAfter("soon", now), null);
  const policy = new RetryPolicy({ backoffMs: 100, maxWaitMs: 2000 });
  assert.equal(policy.waitMs(0, "60"), 2000);
  for (let i = 0; i < 20; i++) {
    const wait = policy.waitMs(2);
    assert.ok(wait >= 200 && wait <= 400, `${wait}`);
  }
  assert.throws(() => new RetryPolicy({ attempts: 0 }), RangeError);
});
