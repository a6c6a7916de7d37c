import { z } from 'zod';
import { type Expr, alias, cast, col, fn, lit } from '../../spark/plan/expressions.js';

/**
 * Data Vault 2.0 hash keys and hashdiffs, computed by Spark's built-in hash functions in the plan
 * and specified bit for bit here (docs/templates/dv-hub.md, "Hash keys") so that any other tool
 * can compute the same keys:
 *
 *   part(v)  = v cast to string (Spark's cast), trimmed of leading and trailing spaces, upper-cased;
 *              NULL or the empty string after trimming becomes NULL_TOKEN
 *   input    = part(v1) || DELIMITER || part(v2) || … (in the configured order of the columns)
 *   key      = upper-case hex of HASH(UTF-8 bytes of input), HASH = MD5 | SHA-1 | SHA-256
 *
 * A hashdiff is the same function over a satellite's payload columns sorted by name.
 */

/** What a NULL or empty part becomes (AutomateDV's default, so keys agree with dbt vaults). */
export const NULL_TOKEN = '^^';
/** Joins the parts; AutomateDV's default. */
export const DELIMITER = '||';

export const HASH_ALGORITHMS = ['md5', 'sha1', 'sha256'] as const;
export type HashAlgorithm = (typeof HASH_ALGORITHMS)[number];

/** Hex digits of each algorithm's digest: the length of a key, and of the zero key. */
export const HEX_LENGTH: Readonly<Record<HashAlgorithm, number>> = { md5: 32, sha1: 40, sha256: 64 };

/** The zero key: the hash key (and hashdiff) of the ghost record, all zeros at the digest's length. */
export const zeroKey = (algorithm: HashAlgorithm): string => '0'.repeat(HEX_LENGTH[algorithm]);

export const hashAlgorithm = () =>
  z.enum(HASH_ALGORITHMS).default('md5').describe('The hash of keys and hashdiffs: md5 (default, 32 hex digits), sha1 (40) or sha256 (64)');

/** One normalised part: `coalesce(nullif(upper(trim(cast(v as string))), ''), '^^')`. */
export function keyPart(value: Expr): Expr {
  return fn('coalesce', fn('nullif', fn('upper', fn('trim', cast(value, 'string'))), lit('')), lit(NULL_TOKEN));
}

/** The text that is hashed: the parts of `values`, in order, joined by the delimiter. */
export function hashInput(values: readonly Expr[]): Expr {
  return fn('concat_ws', lit(DELIMITER), ...values.map(keyPart));
}

/** The hash of `values` as upper-case hex, with Spark's md5, sha1 or sha2(…, 256). */
export function hashOf(values: readonly Expr[], algorithm: HashAlgorithm): Expr {
  const input = hashInput(values);
  const digest = algorithm === 'md5' ? fn('md5', input) : algorithm === 'sha1' ? fn('sha1', input) : fn('sha2', input, lit(256));
  return fn('upper', digest);
}

/** The hash key of business key columns, named `name`. */
export const hashKey = (columns: readonly string[], algorithm: HashAlgorithm, name: string): Expr =>
  alias(
    hashOf(
      columns.map((c) => col(c)),
      algorithm,
    ),
    name,
  );

/**
 * A hashdiff is taken over the payload columns sorted by name (code point order), so listing them
 * in another order in the config does not change it.
 */
export const hashdiffColumns = (payload: readonly string[]): string[] => [...payload].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

/** Whether every part of `values` is NULL or empty: such a key identifies nothing. */
export function noKey(values: readonly Expr[]): Expr {
  return values.map((v) => fn('==', keyPart(v), lit(NULL_TOKEN))).reduce((a, b) => fn('and', a, b));
}
