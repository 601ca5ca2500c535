/** `@strata-memory/client`: a TypeScript client for Strata, layered memory for LLM agents. */
export { StrataClient } from "./client.js";
export type {
  JobRecord,
  WaitOptions,
  DocumentIn, JsonObject, MemoryCreate, MemoryKind, MemoryPatch, RecallOptions, RecallRequest,
  RecallResponse, StrataClientOptions, TurnAck, TurnBatchResponse, TurnIn, TurnOptions,
  ValidationQuestion,
} from "./client.js";
export { StrataError, type StrataErrorCode } from "./errors.js";
export { newTurnId } from "./ids.js";
export { NO_RETRY, parseRetryAfter, RetryPolicy } from "./retry.js";
export type { components, operations, paths } from "./schema.js";
