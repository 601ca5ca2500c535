/**
 * The one error the client throws: the server's `{error, detail}` with its HTTP status, or
 * `backend_unavailable` with status `null` when no server answered.
 */

/** The codes of Strata's error tree (`strata/errors.py`); a proxy may answer others. */
export type StrataErrorCode =
  | "invalid_input"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "conflict"
  | "payload_too_large"
  | "limit_exceeded"
  | "backend_unavailable"
  | "vector_store_error"
  | "queue_store_error"
  | "embedder_error"
  | "internal_error"
  | (string & {});

/** An answer of 400 or more, or no answer at all (`status === null`). */
export class StrataError extends Error {
  /** the HTTP status, or null when the request never got an answer */
  readonly status: number | null;
  /** the server's stable code (`error`), e.g. `not_found`; `""` when the body had none */
  readonly code: StrataErrorCode;
  /** what went wrong, for a person to read (`detail`) */
  readonly detail: string;
  /** the whole parsed body (a failed knowledge import adds its report beside the error) */
  readonly body: unknown;

  constructor(status: number | null, code: string, detail: string, body?: unknown,
              options?: { cause?: unknown }) {
    super(status === null ? detail : `${status}: ${detail}`, options);
    this.name = "StrataError";
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.body = body;
  }

  /** The error of an answer whose status is 400 or more; `body` as openapi-fetch parsed it. */
  static fromResponse(response: Response, body: unknown): StrataError {
    if (isErrorBody(body)) {
      return new StrataError(response.status, body.error, String(body.detail ?? ""), body);
    }
    const text = typeof body === "string" ? body : JSON.stringify(body ?? "");
    return new StrataError(response.status, "", text || response.statusText, body);
  }
}

/** True when `body` is Strata's own error answer, `{error, detail}`. */
export function isErrorBody(body: unknown): body is { error: string; detail?: unknown } {
  return typeof body === "object" && body !== null && !Array.isArray(body)
    && typeof (body as { error?: unknown }).error === "string";
}
