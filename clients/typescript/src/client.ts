/**
 * `StrataClient`: Strata's HTTP API through openapi-fetch, typed by the generated `schema.ts`.
 *
 * Each method is one endpoint. Every request carries the bearer key; a 503 or a connection
 * error is retried with backoff, honouring `Retry-After` (`RetryPolicy`); turns get a client
 * `turn_id` when the caller gives none, made once before the first attempt, so a retried turn
 * is deduplicated by the server instead of written twice. An answer of 400 or more throws
 * `StrataError` with the server's `{error, detail}`.
 */
import createClient, { type Client } from "openapi-fetch";

import { StrataError } from "./errors.js";
import { newTurnId, segment } from "./ids.js";
import { nextWait, type Repeat, RetryPolicy } from "./retry.js";
import type { components, paths } from "./schema.js";

type Schemas = components["schemas"];
/** A JSON object answer whose shape the OpenAPI document leaves open. */
export type JsonObject = { [key: string]: any };
export type TurnAck = Schemas["TurnAck"];
export type TurnBatchResponse = Schemas["TurnBatchResponse"];
export type RecallRequest = Schemas["RecallRequest"];
export type RecallResponse = Schemas["RecallResponse"];
export type MemoryCreate = Schemas["MemoryCreate"];
export type MemoryPatch = Schemas["MemoryPatch"];
export type MemoryKind = Schemas["MemoryKind"];
export type DocumentIn = Schemas["DocumentIn"];
export type ValidationQuestion = Schemas["ValidationQuestion"];
/** A turn as `addTurns` takes it; `turn_id` is made by the client when absent. */
export type TurnIn = Schemas["TurnIn"];
/** A turn as `addTurn` takes it, besides the session, user, role and content. */
export type TurnOptions = Pick<TurnIn, "created_at" | "metadata" | "turn_id">
  & { autoTurnId?: boolean };
export type RecallOptions = Omit<RecallRequest, "user_id" | "query">;
/** A queued job's status record (`GET /v1/jobs/{job_id}`). */
export type JobRecord = Schemas["JobRecord"];
export type ForgetView = Schemas["ForgetView"];
/** How `closeSession` and `waitFor` wait for a job. */
export interface WaitOptions {
  wait?: boolean;
  timeoutMs?: number;
  intervalMs?: number;
  userId?: string;
}

export interface StrataClientOptions {
  /** where Strata listens; default `http://127.0.0.1:8000` */
  baseUrl?: string;
  /** the API key, sent as `Authorization: Bearer <key>`; it fixes the tenant */
  apiKey?: string;
  /** one attempt's time limit in milliseconds; default 30 000 */
  timeoutMs?: number;
  /** how 503s and connection errors are retried; `NO_RETRY` never retries */
  retry?: RetryPolicy;
  /** a fetch to send with (a proxy's, a test's); default `globalThis.fetch` */
  fetch?: typeof globalThis.fetch;
}

type Outcome<D> = { data?: D; error?: unknown; response: Response };
const READ: Repeat = { safe: true, retry: true };
const WRITE: Repeat = { safe: false, retry: true };

/** Drops `undefined` and `null` fields, as the Python SDK's `_clean` does. */
function clean<T extends object>(body: T): T {
  return Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined && v !== null)) as T;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Strata's HTTP API: `new StrataClient({ baseUrl, apiKey })`. */
export class StrataClient {
  readonly baseUrl: string;
  readonly retry: RetryPolicy;
  /** the generated openapi-fetch client, for endpoints this class does not wrap */
  readonly api: Client<paths>;
  private readonly timeoutMs: number;

  constructor({ baseUrl = "http://127.0.0.1:8000", apiKey = "dev", timeoutMs = 30_000,
                retry, fetch }: StrataClientOptions = {}) {
    this.baseUrl = baseUrl;
    this.retry = retry ?? new RetryPolicy();
    this.timeoutMs = timeoutMs;
    this.api = createClient<paths>({
      baseUrl, headers: { Authorization: `Bearer ${apiKey}` }, ...(fetch ? { fetch } : {}),
    });
  }

  /** One request, sent again while the policy says so; the answer's data, or a StrataError. */
  private async send<D>(repeat: Repeat, attempt: (signal: AbortSignal) => Promise<Outcome<D>>):
      Promise<D> {
    for (let retry = 0; ; retry++) {
      let wait: number | null;
      try {
        const { data, error, response } = await attempt(AbortSignal.timeout(this.timeoutMs));
        if (response.ok) return data as D;
        wait = nextWait(this.retry, retry, repeat, {
          status: response.status, retryAfter: response.headers.get("retry-after"), body: error });
        if (wait === null) throw StrataError.fromResponse(response, error);
      } catch (thrown) {
        // an answer that was not JSON is no transport failure: it is not sent again
        if (thrown instanceof StrataError || thrown instanceof SyntaxError) throw thrown;
        wait = nextWait(this.retry, retry, repeat, { thrown });
        if (wait === null) {
          const why = thrown instanceof Error ? `${thrown.name}: ${thrown.message}` : String(thrown);
          throw new StrataError(null, "backend_unavailable",
                                `cannot reach Strata at ${this.baseUrl}: ${why}`, undefined,
                                { cause: thrown });
        }
      }
      await sleep(wait);
    }
  }

  // -- sessions ------------------------------------------------------------------------------
  /** Append a turn; without `turn_id` the client makes one, so a retry is not a second turn
   *  (`autoTurnId: false`: the server numbers it `<session>:<n>`). Answers the ack. */
  async addTurn(sessionId: string, userId: string, role: string, content: string,
                { autoTurnId = true, ...options }: TurnOptions = {}): Promise<TurnAck> {
    const turnId = options.turn_id ?? (autoTurnId ? newTurnId() : undefined);
    const body = clean({ user_id: userId, role, content, ...options, turn_id: turnId });
    const path = { session_id: segment("sessionId", sessionId) };
    const answer = await this.send({ safe: turnId !== undefined, retry: true }, (signal) =>
      this.api.POST("/v1/sessions/{session_id}/turns", { params: { path }, body, signal }));
    return answer as TurnAck;
  }

  /** Many turns of one session, in order, acknowledged once all are durable; each turn
   *  without a `turn_id` gets one from the client (unless `autoTurnId: false`). */
  async addTurns(sessionId: string, userId: string, turns: TurnIn[],
                 { autoTurnId = true }: { autoTurnId?: boolean } = {}): Promise<TurnBatchResponse> {
    const body = { user_id: userId, turns: turns.map((turn) => clean(
      autoTurnId ? { ...turn, turn_id: turn.turn_id || newTurnId() } : turn)) };
    const path = { session_id: segment("sessionId", sessionId) };
    return this.send({ safe: body.turns.every((t) => t.turn_id), retry: true }, (signal) =>
      this.api.POST("/v1/sessions/{session_id}/turns/batch", { params: { path }, body, signal }));
  }

  /** Close a session: queue its long-term extraction and archive its working memory.
   *  `wait`: resolve once the extraction job is done or failed, its record under `job`,
   *  so a recall right after sees what it wrote (a timeout error past `timeoutMs`). */
  async closeSession(sessionId: string, userId: string,
                     { wait = false, timeoutMs = 60_000 }: WaitOptions = {}): Promise<JsonObject> {
    const path = { session_id: segment("sessionId", sessionId) };
    const ack = await this.send(READ, (signal) => this.api.POST("/v1/sessions/{session_id}/close",
      { params: { path }, body: { user_id: userId }, signal })) as JsonObject;
    if (!wait) return ack;
    const jobId = ack.extraction_job as string | null | undefined;
    return { ...ack, job: jobId ? await this.waitFor(jobId, { timeoutMs, userId }) : null };
  }

  /** A queued job's record: `status` (queued, running, done, failed), `attempts`, `written`
   *  (counts: `facts.insert`, `episodes.merge`, …). `userId`: not found unless it is theirs. */
  async job(jobId: string, userId?: string): Promise<JobRecord> {
    const path = { job_id: segment("jobId", jobId) };
    return this.send(READ, (signal) => this.api.GET("/v1/jobs/{job_id}",
      { params: { path, query: clean({ user_id: userId }) }, signal }));
  }

  /** Poll a job until it is done or failed (a failed job is answered, not thrown). */
  async waitFor(jobId: string, { timeoutMs = 60_000, intervalMs = 200, userId }: WaitOptions = {}):
      Promise<JobRecord> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const record = await this.job(jobId, userId);
      if (record.status === "done" || record.status === "failed") return record;
      if (Date.now() >= deadline) {
        throw new Error(`job ${jobId} still ${JSON.stringify(record.status)} after ${timeoutMs} ms`);
      }
      await sleep(intervalMs);
    }
  }

  /** The session's window, rolling summary, pinned turns and task state. */
  async workingMemory(sessionId: string, userId: string): Promise<JsonObject> {
    const path = { session_id: segment("sessionId", sessionId) };
    return this.send(READ, (signal) => this.api.GET("/v1/sessions/{session_id}/working-memory",
      { params: { path, query: { user_id: userId } }, signal })) as Promise<JsonObject>;
  }

  /** RFC 7396 merge patch of the session's task state (repeating it is harmless). */
  async patchTaskState(sessionId: string, userId: string,
                       patch: { [key: string]: unknown }): Promise<JsonObject> {
    const path = { session_id: segment("sessionId", sessionId) };
    return this.send(READ, (signal) => this.api.PATCH("/v1/sessions/{session_id}/task-state",
      { params: { path }, body: { user_id: userId, patch }, signal })) as Promise<JsonObject>;
  }

  // -- recall --------------------------------------------------------------------------------
  /** The labelled context for `query`; options: `session_id`, `budget_tokens`, `layers`,
   *  `top_k`, `debug`, `include_cold`, `recipe`. */
  async recall(userId: string, query: string, options: RecallOptions = {}):
      Promise<RecallResponse> {
    const body = clean({ ...options, user_id: userId, query });
    return this.send(READ, (signal) => this.api.POST("/v1/recall", { body, signal }));
  }

  // -- memories ------------------------------------------------------------------------------
  /** Create a memory: a fact (`key` and `value`), an episode (`text`) or, with an admin key,
   *  a procedure. Answers `{memory, ...}` as the server reports the write. */
  async remember(userId: string, memory: Partial<MemoryCreate> & { kind?: MemoryKind }):
      Promise<JsonObject> {
    const body = clean({ kind: "fact" as MemoryKind, ...memory });
    const path = { user_id: segment("userId", userId) };
    return this.send(WRITE, (signal) => this.api.POST("/v1/users/{user_id}/memories",
      { params: { path }, body, signal })) as Promise<JsonObject>;
  }

  /** List or search a user's memories: `{memories: [...]}`. */
  async listMemories(userId: string, filter: { kind?: MemoryKind; status?: string; q?: string;
                                               limit?: number } = {}): Promise<JsonObject> {
    const path = { user_id: segment("userId", userId) };
    return this.send(READ, (signal) => this.api.GET("/v1/users/{user_id}/memories",
      { params: { path, query: clean({ limit: 100, ...filter }) }, signal })) as Promise<JsonObject>;
  }

  /** Every version of a fact: `{versions: [...]}`. */
  async history(userId: string, memoryId: string): Promise<JsonObject> {
    const path = { user_id: segment("userId", userId), memory_id: segment("memoryId", memoryId) };
    return this.send(READ, (signal) => this.api.GET(
      "/v1/users/{user_id}/memories/{memory_id}/history", { params: { path }, signal },
    )) as Promise<JsonObject>;
  }

  /** Edit a memory; a fact's new value becomes a new version: `{memory}`. */
  async updateMemory(userId: string, memoryId: string, patch: MemoryPatch): Promise<JsonObject> {
    const path = { user_id: segment("userId", userId), memory_id: segment("memoryId", memoryId) };
    return this.send(WRITE, (signal) => this.api.PATCH("/v1/users/{user_id}/memories/{memory_id}",
      { params: { path }, body: clean(patch), signal })) as Promise<JsonObject>;
  }

  /** Delete a memory, its versions and its source turns: `{deleted, ...}`. */
  async forget(userId: string, memoryId: string): Promise<JsonObject> {
    const path = { user_id: segment("userId", userId), memory_id: segment("memoryId", memoryId) };
    return this.send(READ, (signal) => this.api.DELETE("/v1/users/{user_id}/memories/{memory_id}",
      { params: { path }, signal })) as Promise<JsonObject>;
  }

  /** The user's forgets said in conversation, newest first: `undoable` until `undo_until`. */
  async forgets(userId: string, agent?: string): Promise<{ forgets: ForgetView[] }> {
    const path = { user_id: segment("userId", userId) };
    return this.send(READ, (signal) => this.api.GET("/v1/users/{user_id}/forgets",
      { params: { path, query: clean({ agent }) }, signal }));
  }

  /** Undo a conversational forget (its id: a turn's `intents.forgets`) in its grace period. */
  async undoForget(userId: string, forgetId: string, agent?: string): Promise<ForgetView> {
    const path = { user_id: segment("userId", userId), forget_id: segment("forgetId", forgetId) };
    return this.send(WRITE, (signal) => this.api.POST("/v1/users/{user_id}/forgets/{forget_id}/undo",
      { params: { path, query: clean({ agent }) }, signal }));
  }

  /** (admin) Forget everything about a user. */
  async forgetUser(userId: string): Promise<JsonObject> {
    const path = { user_id: segment("userId", userId) };
    return this.send(READ, (signal) => this.api.DELETE("/v1/users/{user_id}",
      { params: { path }, signal })) as Promise<JsonObject>;
  }

  /** The tenant's users that have long-term memory: `{users, truncated}`. */
  async users(filter: { q?: string; limit?: number } = {}): Promise<JsonObject> {
    return this.send(READ, (signal) => this.api.GET("/v1/users",
      { params: { query: clean({ limit: 1000, ...filter }) }, signal })) as Promise<JsonObject>;
  }

  // -- knowledge -----------------------------------------------------------------------------
  /** (admin) Versioned import; a failed validation keeps the previous versions (422). */
  async importDocuments(documents: DocumentIn[], validate?: ValidationQuestion[]):
      Promise<JsonObject> {
    return this.send(WRITE, (signal) => this.api.POST("/v1/knowledge/documents",
      { body: clean({ documents, validate }), signal })) as Promise<JsonObject>;
  }

  /** The tenant's documents with their versions and chunk statuses. */
  async documents(): Promise<JsonObject> {
    return this.send(READ, (signal) => this.api.GET("/v1/knowledge/documents", { signal })) as
      Promise<JsonObject>;
  }

  /** One document's chunks with versions and statuses (a doc id may name a folder). */
  async document(docId: string): Promise<JsonObject> {
    const path = { doc_id: segment("docId", docId, true) };
    return this.send(READ, (signal) => this.api.GET("/v1/knowledge/documents/{doc_id}",
      { params: { path }, signal })) as Promise<JsonObject>;
  }

  /** Search the tenant's active knowledge chunks. */
  async searchKnowledge(query: string, topK = 5): Promise<JsonObject> {
    return this.send(READ, (signal) => this.api.POST("/v1/knowledge/search",
      { body: { query, top_k: topK }, signal })) as Promise<JsonObject>;
  }

  // -- service -------------------------------------------------------------------------------
  /** The key's tenant and role: `{tenant, role}`. */
  async whoami(): Promise<JsonObject> {
    return this.send(READ, (signal) => this.api.GET("/v1/whoami", { signal })) as
      Promise<JsonObject>;
  }

  /** Backlog and extraction lag of the long-term write queues. */
  async queues(): Promise<JsonObject> {
    return this.send(READ, (signal) => this.api.GET("/v1/queues", { signal })) as
      Promise<JsonObject>;
  }

  /** (admin) Each shard's hot index: users, memories, bytes, loads, evictions. */
  async hotIndex(): Promise<JsonObject> {
    return this.send(READ, (signal) => this.api.GET("/v1/admin/hot-index", { signal })) as
      Promise<JsonObject>;
  }

  /** Liveness. */
  async health(): Promise<JsonObject> {
    return this.send(READ, (signal) => this.api.GET("/healthz", { signal })) as
      Promise<JsonObject>;
  }

  /** Readiness; a 503 (not ready) is the answer here, thrown at once, not retried. */
  async ready(): Promise<JsonObject> {
    return this.send({ safe: true, retry: false }, (signal) =>
      this.api.GET("/readyz", { signal })) as Promise<JsonObject>;
  }

  /** The Prometheus metrics, as text. */
  async metrics(): Promise<string> {
    return this.send(READ, (signal) => this.api.GET("/metrics", { parseAs: "text", signal }));
  }
}
