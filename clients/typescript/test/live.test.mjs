// The client against a running Strata (tests/ray/test_typescript_client.py starts one):
//   STRATA_URL=http://127.0.0.1:8000 STRATA_KEY=<agent key of tenant A>
//   STRATA_OTHER_KEY=<agent key of tenant B> STRATA_ADMIN_KEY=<admin key of tenant A>
//   node --test test/live.test.mjs
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { StrataClient, StrataError } from "../dist/index.js";

const { STRATA_URL: baseUrl, STRATA_KEY, STRATA_OTHER_KEY, STRATA_ADMIN_KEY } = process.env;
const skip = baseUrl ? false : "STRATA_URL is not set (no live service to call)";

describe("the client against the live service", { skip }, () => {
  const acme = new StrataClient({ baseUrl, apiKey: STRATA_KEY });
  const globex = new StrataClient({ baseUrl, apiKey: STRATA_OTHER_KEY });
  const user = `ann-${Date.now()}`;  // a fresh user, so a rerun against one service is clean
  let memoryId;

  test("whoami names the key's tenant, role and agent", async () => {
    assert.deepEqual(await acme.whoami(), { tenant: "acme", role: "agent", agent: null });
    assert.deepEqual(await globex.whoami(), { tenant: "globex", role: "agent", agent: null });
  });

  test("turns are appended with client turn ids, and a repeated turn_id is not a second turn",
       async () => {
    const batch = await acme.addTurns("s1", user, [
      { role: "user", content: "Hi, I'm Ann." },
      { role: "assistant", content: "Hello Ann, how can I help?" },
    ]);
    assert.equal(batch.session_id, "s1");
    assert.deepEqual(batch.acks.map((a) => a.turn_count), [1, 2]);
    assert.ok(batch.acks.every((a) => /^c-[0-9a-f]{32}$/.test(a.turn_id)));
    const first = await acme.addTurn("s1", user, "user", "I always book a window seat.");
    assert.equal(first.turn_count, 3);
    assert.equal(first.duplicate, false);
    const again = await acme.addTurn("s1", user, "user", "I always book a window seat.",
                                     { turn_id: first.turn_id });
    assert.equal(again.duplicate, true);
    assert.equal(again.turn_count, 3);
  });

  test("recall returns the session's turns as labelled context", async () => {
    const recalled = await acme.recall(user, "which seat does Ann like?", { session_id: "s1" });
    assert.match(recalled.context, /window seat/);
    assert.equal(typeof recalled.route, "string");
    assert.equal(recalled.degraded, false);
  });

  test("remember a fact, list it, recall it without the session", async () => {
    const written = await acme.remember(user, { key: "preference.seat", value: "window" });
    memoryId = written.memory.id;
    assert.equal(typeof memoryId, "string");
    const listed = await acme.listMemories(user, { kind: "fact" });
    assert.deepEqual(listed.memories.map((m) => [m.id, m.key, m.value]),
                     [[memoryId, "preference.seat", "window"]]);
    const recalled = await acme.recall(user, "preference seat window", { layers: ["facts"] });
    assert.ok(recalled.items.some((i) => i.id === memoryId), JSON.stringify(recalled.items));
  });

  test("closing a session names its extraction job; its status is readable by its tenant only",
       async () => {
    await acme.addTurn("s-job", user, "user", "I'm allergic to peanuts.");
    const ack = await acme.closeSession("s-job", user);
    const jobId = ack.extraction_job;
    assert.match(jobId, /^\d+-\d+$/);
    const record = await acme.job(jobId, user);
    assert.equal(record.id, jobId);
    assert.equal(record.session_id, "s-job");
    assert.ok(["queued", "running", "done"].includes(record.status), record.status);
    await assert.rejects(globex.job(jobId), (e) => e instanceof StrataError && e.status === 404);
    await assert.rejects(acme.job(jobId, `${user}-other`),
                         (e) => e instanceof StrataError && e.status === 404);
    // the service under this test runs no extraction worker: the job stays queued
    await assert.rejects(acme.waitFor(jobId, { timeoutMs: 300, intervalMs: 50 }),
                         /still "queued"/);
    const again = await acme.closeSession("s-job", user, { wait: true });
    assert.equal(again.already_closed, true);
    assert.equal(again.job, null);
  });

  test("another tenant's key sees nothing of it and cannot forget it", async () => {
    assert.deepEqual((await globex.listMemories(user)).memories, []);
    const theirs = await globex.recall(user, "which seat does Ann like?", { session_id: "s1" });
    assert.doesNotMatch(theirs.context, /window/);
    const error = await globex.forget(user, memoryId).catch((e) => e);
    assert.ok(error instanceof StrataError, String(error));
    assert.equal(error.status, 404);
    assert.equal(error.code, "not_found");
    assert.equal((await acme.listMemories(user)).memories.length, 1);
  });

  test("forget removes the memory", async () => {
    const deleted = await acme.forget(user, memoryId);
    assert.equal(deleted.deleted, memoryId);
    assert.deepEqual((await acme.listMemories(user)).memories, []);
  });

  test("a wrong key gets 401 unauthorized", async () => {
    const stranger = new StrataClient({ baseUrl, apiKey: "not-a-key" });
    const error = await stranger.whoami().catch((e) => e);
    assert.ok(error instanceof StrataError, String(error));
    assert.equal(error.status, 401);
    assert.equal(error.code, "unauthorized");
    assert.ok(error.detail.length > 0);
  });

  test("bad input gets 422 {error, detail} and writes nothing", async () => {
    const noValue = await acme.remember(user, { key: "preference.meal" }).catch((e) => e);
    assert.equal(noValue.status, 422);
    assert.equal(noValue.code, "invalid_input");
    assert.equal(typeof noValue.detail, "string");
    const badStatus = await acme.listMemories(user, { status: "bogus" }).catch((e) => e);
    assert.equal(badStatus.status, 422);
    assert.match(badStatus.detail, /bogus/);
    assert.deepEqual((await acme.listMemories(user)).memories, []);
  });

  test("knowledge: an admin imports a document, an agent searches it", { skip: !STRATA_ADMIN_KEY },
       async () => {
    const admin = new StrataClient({ baseUrl, apiKey: STRATA_ADMIN_KEY });
    const forbidden = await acme.importDocuments([{ doc_id: "x", title: "", text: "y" }])
      .catch((e) => e);
    assert.equal(forbidden.status, 403);
    await admin.importDocuments([{ doc_id: "travel/policy", title: "Travel policy",
                                   text: "Book economy class for flights under six hours." }]);
    const doc = await admin.document("travel/policy");
    assert.equal(doc.doc_id, "travel/policy");
    const found = await acme.searchKnowledge("economy class flights", 3);
    assert.equal(found.results[0]?.doc_id, "travel/policy");
    assert.deepEqual((await globex.searchKnowledge("economy class flights", 3)).results, []);
  });
});
