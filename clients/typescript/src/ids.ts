/** Ids: the client's turn ids, and ids checked before they become a URL path segment. */

async function webCrypto(): Promise<Crypto> {
  const global = (globalThis as { crypto?: Crypto }).crypto;
  if (global !== undefined) return global;
  // node 18 has WebCrypto as a module export only; a variable specifier keeps bundlers away
  const specifier = "node:crypto";
  const mod = (await import(specifier)) as { webcrypto: Crypto };
  return mod.webcrypto;
}

const random = await webCrypto();

/** A client-made turn id: `c-` and 32 hex digits (the server's id rules allow it). */
export function newTurnId(): string {
  const bytes = random.getRandomValues(new Uint8Array(16));
  return "c-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * `value` checked to be safe as one path segment (openapi-fetch percent-encodes it).
 *
 * `.` and `..` are refused: the URL parser resolves them as dot segments, and the request
 * would reach another user's resource (`forget("a", "../../victim")` would delete user
 * `victim`). So are slashes and backslashes unless `folders` (a document id may name a
 * folder): a proxy that decodes `%2F` and normalises the path would resolve them too.
 */
export function segment(name: string, value: string, folders = false): string {
  if (typeof value !== "string") {
    throw new TypeError(`${name} must be a string; got ${typeof value}`);
  }
  const parts = folders ? value.split("/") : [value];
  if (parts.some((part) => part === "" || part === "." || part === "..")) {
    throw new RangeError(`${name} ${JSON.stringify(value)} is not a valid id: empty, '.' or '..'`);
  }
  if (value.includes("\\") || (!folders && value.includes("/"))) {
    throw new RangeError(`${name} ${JSON.stringify(value)} is not a valid id: it holds a slash`);
  }
  return value;
}
