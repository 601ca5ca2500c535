/**
 * When a request is sent again: on a 503 (honouring `Retry-After`) and on connection errors,
 * with exponential backoff and jitter, as the Python SDK's `RetryPolicy` does.
 */
import { isErrorBody } from "./errors.js";

/** How 503s and connection errors are retried. */
export class RetryPolicy {
  /** every try, the first included (1 = never retry) */
  readonly attempts: number;
  /** the first retry's full backoff; the n-th waits `backoffMs * 2**(n-1)` with jitter */
  readonly backoffMs: number;
  /** no wait is longer, whatever `Retry-After` says */
  readonly maxWaitMs: number;

  constructor({ attempts = 4, backoffMs = 250, maxWaitMs = 30_000 }:
                { attempts?: number; backoffMs?: number; maxWaitMs?: number } = {}) {
    if (!Number.isInteger(attempts) || attempts < 1) {
      throw new RangeError("attempts must be an integer of at least 1");
    }
    if (!(backoffMs >= 0) || !(maxWaitMs >= 0)) {
      throw new RangeError("backoffMs and maxWaitMs must not be negative");
    }
    this.attempts = attempts;
    this.backoffMs = backoffMs;
    this.maxWaitMs = maxWaitMs;
  }

  /** Milliseconds to wait before retry number `retry` (0 for the first retry). */
  waitMs(retry: number, retryAfter?: string | null): number {
    const told = retryAfter ? parseRetryAfter(retryAfter) : null;
    if (told !== null) return Math.min(told, this.maxWaitMs);
    const full = Math.min(this.backoffMs * 2 ** retry, this.maxWaitMs);
    return full / 2 + Math.random() * (full / 2);
  }
}

/** Never retry. */
export const NO_RETRY = new RetryPolicy({ attempts: 1 });

/** `Retry-After` in milliseconds: seconds, or an HTTP date (RFC 9110 §10.2.3); null if neither. */
export function parseRetryAfter(value: string, now: number = Date.now()): number | null {
  const trimmed = value.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed) * 1000;
  const when = Date.parse(trimmed);
  return Number.isNaN(when) ? null : Math.max(0, when - now);
}

/** How one request may be repeated. */
export interface Repeat {
  /** safe to send again after a connection error mid-request (reads, deletes, turns with
   *  their `turn_id`, recall) */
  safe: boolean;
  /** false: one try, whatever happens (readiness: a 503 is the answer) */
  retry: boolean;
}

// errors raised before the request left: sending it again cannot do anything twice
const NOT_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH",
                          "ENETUNREACH", "UND_ERR_CONNECT_TIMEOUT"]);

/** True when `error` (what fetch threw) says the request never reached the server. */
export function neverSent(error: unknown): boolean {
  const codes: unknown[] = [];
  let cause: unknown = (error as { cause?: unknown } | null)?.cause;
  while (cause && typeof cause === "object" && codes.length < 8) {
    codes.push((cause as { code?: unknown }).code);
    const inner = (cause as { errors?: unknown }).errors;  // AggregateError: one per address
    if (Array.isArray(inner)) codes.push(...inner.map((e) => (e as { code?: unknown })?.code));
    cause = (cause as { cause?: unknown }).cause;
  }
  return codes.some((code) => typeof code === "string" && NOT_SENT.has(code));
}

/** A gateway error, or a 500 that is not Strata's `{error, detail}`: the request died on its
 *  way (a proxy whose replica went with its node), not in Strata's code. */
export function lostBeforeStrata(status: number, body: unknown): boolean {
  if (status === 502 || status === 504) return true;
  return status === 500 && !isErrorBody(body);
}

/** A 429 of the rate limit: refused before any work, so any request may be sent again
 *  (another 429, such as a full scope's, is final). */
export function rateLimited(status: number, body: unknown): boolean {
  return status === 429 && isErrorBody(body)
    && (body as { error?: unknown }).error === "rate_limited";
}

/** Milliseconds to wait before sending again, or null: this outcome is final. */
export function nextWait(policy: RetryPolicy, retry: number, repeat: Repeat,
                         outcome: { status: number; retryAfter: string | null; body: unknown }
                           | { thrown: unknown }): number | null {
  if (!repeat.retry || retry + 1 >= policy.attempts) return null;
  if ("thrown" in outcome) {
    return neverSent(outcome.thrown) || repeat.safe ? policy.waitMs(retry) : null;
  }
  if (outcome.status === 503 || rateLimited(outcome.status, outcome.body)) {
    return policy.waitMs(retry, outcome.retryAfter);
  }
  if (repeat.safe && lostBeforeStrata(outcome.status, outcome.body)) return policy.waitMs(retry);
  return null;
}
