import { z } from 'zod';
import type { ConfigIssue, LocatedIssue } from '../errors.js';
import { CATALOG_PATTERN, COLUMN_PATTERN, NAME_PATTERN, TABLE_NAME_PATTERN, STORAGE_URI_PATTERN, storageUriProblem } from '../naming.js';
import { type ConfigExpression, MAX_EXPRESSION_LENGTH, parseExpression } from '../expression/index.js';
import { closest } from './closest.js';

export { closest } from './closest.js';

/**
 * Schema building blocks shared by every template, and the one place that turns zod's issues into
 * config issues (`path: message`), with "did you mean" hints for unknown keys.
 */

export const name = () => z.string().regex(NAME_PATTERN, `must match ${NAME_PATTERN.source} (a lower-case letter, then lower-case letters, digits or _)`);

/** The name of a table a template writes (a target): a name() without `__` (reserved, TABLE_NAME_PATTERN). */
export const tableName = () =>
  z
    .string()
    .regex(
      TABLE_NAME_PATTERN,
      `must match ${TABLE_NAME_PATTERN.source} (a lower-case letter, then lower-case letters, digits or single _; "__" is kept for the tables the runner derives from a target, like <table>__quarantine)`,
    );

export const columnName = () => z.string().regex(COLUMN_PATTERN, `a column name must match ${COLUMN_PATTERN.source}`);

export const catalogName = () => z.string().regex(CATALOG_PATTERN, `a catalog name must match ${CATALOG_PATTERN.source}`);

/**
 * An absolute, literal storage URI: `s3a://bucket/prefix`, `file:///var/lake/acme`, `abfss://…`.
 * Nothing Hadoop would expand or unescape (globs, backslashes, percent-escapes), no `.`/`..` or
 * empty segments: the policy of src/core/naming.ts, for tenants' roots and the platform's alike.
 */
export const storageUri = () =>
  z
    .string()
    .superRefine((v, ctx) => {
      const problem = storageUriProblem(v);
      if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
    })
    .meta({ pattern: STORAGE_URI_PATTERN.source });

/**
 * A config expression (`source.where`, `cdc.delete-when`, …), parsed by the project's own grammar
 * (docs/expressions.md) into a tree of columns of the row, literals, operators and allow-listed
 * functions. Its text never reaches Spark: plans are built from the tree, so a subquery, a table, a
 * comment or a reflection call cannot be expressed, let alone sent. A refusal names the position.
 */
export const expression = (what: string) =>
  z
    .string()
    .min(1, `${what} must not be empty`)
    .max(MAX_EXPRESSION_LENGTH, `${what} is longer than ${MAX_EXPRESSION_LENGTH} characters`)
    .transform((text, ctx): ConfigExpression => {
      const parsed = parseExpression(text);
      if (parsed.ok) return Object.freeze({ text, ast: parsed.ast });
      ctx.addIssue({ code: 'custom', message: `at position ${parsed.pos}: ${parsed.message}` });
      return z.NEVER;
    });

/** An ISO calendar date, as `--set target.snapshot-date={{ ds }}` gives it. */
export const isoDate = () =>
  z
    .string()
    .regex(/^\d{4}-\d{2}-\d{2}$/, 'must be a date like 2026-07-05')
    .refine((v) => !Number.isNaN(Date.parse(`${v}T00:00:00Z`)) && new Date(`${v}T00:00:00Z`).toISOString().startsWith(v), 'is not a valid calendar date');

/** Seconds per unit of a duration, by every name the unit may be written with. */
const DURATION_UNITS: ReadonlyMap<string, number> = new Map(
  (
    [
      [1, ['s', 'sec', 'secs', 'second', 'seconds']],
      [60, ['m', 'min', 'mins', 'minute', 'minutes']],
      [3600, ['h', 'hour', 'hours']],
      [86_400, ['d', 'day', 'days']],
      [604_800, ['w', 'week', 'weeks']],
    ] as const
  ).flatMap(([seconds, names]) => names.map((n) => [n, seconds] as const)),
);
const DURATION = /^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$/;

/** A duration as HOCON writes one (`6h`, `90 minutes`, `2 days`); a unit is required (HOCON would read a bare number as milliseconds). */
export interface Duration {
  readonly text: string;
  readonly seconds: number;
}

/** A duration of at least a second and at most `maxDays`, as its text and its seconds. */
export const duration = (maxDays = 3650) =>
  z
    .string()
    .regex(DURATION, 'must be a duration with its unit, like "6h", "90 minutes" or "2 days" (units: s, m, h, d, w)')
    .transform((text, ctx): Duration => {
      const [, amount, unit] = DURATION.exec(text)!;
      const per = DURATION_UNITS.get(unit!);
      if (per === undefined) {
        ctx.addIssue({
          code: 'custom',
          message: `has the unknown unit "${unit}" (units: s, m, h, d, w, or their names: seconds, minutes, hours, days, weeks)`,
        });
        return z.NEVER;
      }
      const seconds = Number(amount) * per;
      if (seconds < 1 || seconds > maxDays * 86_400) {
        ctx.addIssue({ code: 'custom', message: `must be between 1 second and ${maxDays} days (it is ${text.trim()})` });
        return z.NEVER;
      }
      return Object.freeze({ text: text.trim(), seconds });
    });

/** The `job` and `tenant` sections every template shares. */
export const jobSection = (template: string, version: number) =>
  z
    .object({
      template: z.literal(template).optional().describe('The template this config is for; --job must agree when both are given.'),
      'schema-version': z.literal(version).describe("The version of the template's config schema this config is written against."),
      name: z
        .string()
        .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/, 'a job name is 1-128 letters, digits, _ . -')
        .optional()
        .describe('A name for logs, the status document and lineage (default: the template name).'),
    })
    .strict()
    .describe('Which template and schema version this config is for.');

export const tenantSection = () =>
  z
    .object({
      id: name().describe('The tenant: its namespaces are <catalog>.<id>_bronze|silver|gold; the platform config may list the known tenants.'),
      'storage-root': storageUri().describe(
        "The tenant's storage root (s3a://…, abfss://…, file:///…), under which every layer's files live; must be one of the platform's roots for the tenant.",
      ),
    })
    .strict()
    .describe('Whose data this job reads and writes.');

export function formatPath(path: readonly PropertyKey[]): string {
  return path
    .map((p) => (typeof p === 'number' ? `[${p}]` : String(p)))
    .join('.')
    .replaceAll('.[', '[');
}

/**
 * zod issues → config issues, one per problem, each with its full path. A misspelled required key
 * is one problem, not two: "unknown key; did you mean" replaces the "is required" of the key it names.
 */
export function toConfigIssues(
  error: z.ZodError,
  knownKeys?: (path: readonly PropertyKey[]) => string[],
  origin?: (path: readonly PropertyKey[]) => string | undefined,
  input?: unknown,
): LocatedIssue[] {
  const issues = issuesOf(error, knownKeys, input);
  const misspelled = new Set(issues.flatMap((i) => (i.meant === undefined ? [] : [i.meant])));
  return issues
    .filter((i) => !(i.required && misspelled.has(i.path)))
    .map(({ path, message, raw }) => {
      const at = origin?.(raw);
      return { path, message, ...(at ? { at } : {}) };
    });
}

type RawIssue = ConfigIssue & { raw: readonly PropertyKey[]; meant?: string; required?: boolean };

function issuesOf(error: z.ZodError, knownKeys?: (path: readonly PropertyKey[]) => string[], input?: unknown): RawIssue[] {
  const out: RawIssue[] = [];
  for (const issue of error.issues) {
    if (issue.code === 'unrecognized_keys') {
      const siblings = knownKeys?.(issue.path) ?? [];
      for (const key of issue.keys) {
        const hint = closest(key, siblings);
        out.push({
          path: formatPath([...issue.path, key]),
          raw: [...issue.path, key],
          message: `unknown key${hint ? `; did you mean "${hint}"?` : siblings.length ? ` (known: ${siblings.join(', ')})` : ''}`,
          ...(hint ? { meant: formatPath([...issue.path, hint]) } : {}),
        });
      }
    } else if (issue.code === 'invalid_key') {
      // A record's key (a tenant, a connection, a cluster, a catalog): say the naming rule it broke.
      const rule = (issue as unknown as { issues?: { message: string }[] }).issues?.[0]?.message;
      const key = String(issue.path[issue.path.length - 1] ?? '');
      const suggestion = key.toLowerCase().replace(/[^a-z0-9_]/g, '_');
      out.push({
        path: formatPath(issue.path),
        raw: issue.path,
        message: `is not a valid name: it ${rule ?? 'breaks the naming rule'}${suggestion !== key && /^[a-z][a-z0-9_]*$/.test(suggestion) ? ` (e.g. "${suggestion}")` : ''}`,
      });
    } else if (issue.code === 'invalid_union') {
      // Report the branch that got furthest: its issues are the actionable ones.
      const branches = (issue as unknown as { errors: z.core.$ZodIssue[][] }).errors;
      const best = branches.reduce((a, b) => (b.length < a.length ? b : a), branches[0] ?? []);
      if (best.length === 0) out.push({ path: formatPath(issue.path), raw: issue.path, message: issue.message });
      for (const sub of best) out.push(...issuesOf(new z.ZodError([{ ...sub, path: [...issue.path, ...sub.path] }]), knownKeys, input));
    } else {
      const message = describeIssue(issue, input);
      out.push({ path: formatPath(issue.path), raw: issue.path, message, ...(message === 'is required' ? { required: true } : {}) });
    }
  }
  return out;
}

function describeIssue(issue: z.core.$ZodIssue, input: unknown): string {
  if (issue.code === 'invalid_type') {
    // zod's issues carry no input: whether the key is missing is read from the config itself.
    const value = input === undefined ? (issue as { input?: unknown }).input : valueAt(input, issue.path);
    if (value === undefined) return 'is required';
    return `must be ${KINDS[issue.expected] ?? issue.expected}, not ${kindOf(value)}`;
  }
  if (issue.code === 'invalid_value' && 'values' in issue) {
    const values = (issue as { values: unknown[] }).values;
    return values.length === 1 ? `must be ${JSON.stringify(values[0])}` : `must be one of ${values.map((v) => JSON.stringify(v)).join(', ')}`;
  }
  return issue.message.replace(/^Invalid input: /, '');
}

const KINDS: Readonly<Record<string, string>> = Object.assign(Object.create(null) as Record<string, string>, {
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  bigint: 'an integer',
  boolean: 'true or false',
  array: 'a list',
  tuple: 'a list',
  object: 'an object',
  record: 'an object',
  map: 'an object',
  null: 'null',
  date: 'a date',
});

/** What a config value is, in the words of the messages (never the value: it may be long or a secret's name). */
function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'bigint') return 'an integer beyond the range of a number (2^53)';
  if (typeof v === 'object') return 'an object';
  if (typeof v === 'boolean') return `${String(v)} (a boolean)`;
  return typeof v === 'string' ? 'a string' : typeof v === 'number' ? 'a number' : typeof v;
}

/** The value at a zod issue's path in the parsed config, own keys only. */
function valueAt(v: unknown, path: readonly PropertyKey[]): unknown {
  for (const p of path) {
    if (typeof v !== 'object' || v === null || !Object.hasOwn(v, p)) return undefined;
    v = (v as Record<PropertyKey, unknown>)[p];
  }
  return v;
}

/** The keys a strict object schema accepts at `path`, for "did you mean" hints. */
export function keysAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  let node: z.ZodType | undefined = unwrap(schema);
  for (const p of path) {
    if (!node) return [];
    if (node instanceof z.ZodObject) node = unwrap(node.shape[p as string] as z.ZodType | undefined);
    else if (node instanceof z.ZodArray) node = unwrap(node.element as z.ZodType);
    else if (node instanceof z.ZodRecord) node = unwrap(node._zod.def.valueType as z.ZodType);
    else return [];
  }
  return node instanceof z.ZodObject ? Object.keys(node.shape) : [];
}

function unwrap(s: z.ZodType | undefined): z.ZodType | undefined {
  let cur = s;
  for (let i = 0; i < 10 && cur; i++) {
    if (cur instanceof z.ZodOptional || cur instanceof z.ZodDefault || cur instanceof z.ZodNullable) cur = cur._zod.def.innerType as z.ZodType;
    else if (cur instanceof z.ZodPipe) cur = cur._zod.def.in as z.ZodType;
    else break;
  }
  return cur;
}

/**
 * A column type from config, normalised (trimmed, lower case, no spaces). It travels as a type name
 * that Spark parses, so only the given scalar types and decimal(p,s) pass.
 */
export function columnTypeName(scalars: readonly string[]) {
  return z
    .string()
    .transform((t) => t.trim().toLowerCase().replace(/\s+/g, ''))
    .refine(
      (t) => {
        if (scalars.includes(t)) return true;
        const m = /^decimal\((\d{1,2}),(\d{1,2})\)$/.exec(t);
        return m !== null && Number(m[1]) >= 1 && Number(m[1]) <= 38 && Number(m[2]) <= Number(m[1]);
      },
      `must be one of ${scalars.join(', ')} or decimal(p,s) with 1 <= p <= 38 and s <= p`,
    );
}
