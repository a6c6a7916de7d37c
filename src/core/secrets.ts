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
    if (value.length >= 4) known.add(value);
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

/** Replace every known secret value inside `text`. */
export function scrub(text: string): string {
  let out = text;
  for (const value of known) {
    if (out.includes(value)) out = out.split(value).join(REDACTED);
  }
  return out;
}

export const redacted = REDACTED;
