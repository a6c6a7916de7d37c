/**
 * Secrets (passwords, tokens) travel as `Secret` values: printing, logging or serialising one shows
 * `[redacted]`. Only `reveal()` gives the value, and only the code that sends it to its recipient
 * (gRPC metadata, a JDBC option) calls it. Every revealed value is also remembered, so `scrub()`
 * can remove it from any text that might still carry it (a server's error message, a plan dump).
 */

const REDACTED = '[redacted]';
const known = new Set<string>();

export class Secret {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
    registerSecretValue(value);
  }

  reveal(): string {
    return this.#value;
  }

  toString(): string {
    return REDACTED;
  }

  toJSON(): string {
    return REDACTED;
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return REDACTED;
  }
}

/**
 * Remember a secret value for `scrub`, as written and in the forms it takes inside JSON text and a
 * connection string. Values shorter than 4 characters are not scrubbed: they would mangle ordinary text.
 */
export function registerSecretValue(value: string): void {
  if (value.length < 4) return;
  known.add(value);
  known.add(JSON.stringify(value).slice(1, -1));
  known.add(encodeURIComponent(value));
}

/**
 * The token of a Spark Connect connection string (`sc://host/;token=…`), registered before anything
 * parses the string: wherever the string came from, its token is scrubbed from every output.
 */
export function registerConnectionSecrets(remote: string | undefined): void {
  if (!remote) return;
  for (const m of remote.matchAll(/;\s*token\s*=([^;]*)/gi)) {
    registerSecretValue(m[1]!);
    try {
      registerSecretValue(decodeURIComponent(m[1]!));
    } catch {
      // a malformed encoding: the raw form is registered, the parser will refuse the string
    }
  }
}

/** Replace every known secret value inside `text`, longest first (one may contain another). */
export function scrub(text: string): string {
  let out = text;
  for (const value of [...known].sort((a, b) => b.length - a.length)) {
    if (out.includes(value)) out = out.split(value).join(REDACTED);
  }
  return out;
}

export const redacted = REDACTED;
