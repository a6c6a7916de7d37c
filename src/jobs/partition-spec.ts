import { type Expr, col, fn, lit } from '../spark/plan/expressions.js';

/**
 * Partition fields and the table-property allow-list (docs/table-shape.md), free of zod: the runner
 * checks tables against them, and the command line must not load zod before a command is chosen.
 */

export type Format = 'iceberg' | 'delta';

export const TIME_TRANSFORMS = ['years', 'months', 'days', 'hours'] as const;
type TimeTransform = (typeof TIME_TRANSFORMS)[number];

/** One field of a partition spec, as the config names it. */
export type PartitionField =
  | { readonly kind: 'identity'; readonly column: string }
  | { readonly kind: TimeTransform; readonly column: string }
  | { readonly kind: 'bucket'; readonly buckets: number; readonly column: string }
  | { readonly kind: 'truncate'; readonly width: number; readonly column: string };

/** A partition field with the config path it came from, what the runner checks against the table's columns. */
export interface PartitionFieldAt {
  readonly field: PartitionField;
  readonly path: string;
}

/** What a table is created with beyond its columns, and what an existing table is checked against. */
export interface TableShape {
  /** The spec the table is created with (the template's default when the config names none). */
  readonly partitionBy: readonly PartitionFieldAt[];
  /** Whether the config named the spec: only then is an existing table's spec checked against it. */
  readonly partitionByConfigured: boolean;
  /** The allow-listed properties the config sets (values normalised to text), each with its path. */
  readonly properties: Readonly<Record<string, string>>;
  readonly propertiesPath: string;
}

const COLUMN = '[A-Za-z_][A-Za-z0-9_]*';
const FIELD_FORMS: readonly [RegExp, (m: RegExpMatchArray) => PartitionField][] = [
  [new RegExp(`^(${COLUMN})$`), (m) => ({ kind: 'identity', column: m[1]! })],
  [
    new RegExp(`^(years?|months?|days?|hours?)\\(\\s*(${COLUMN})\\s*\\)$`, 'i'),
    (m) => ({ kind: `${m[1]!.toLowerCase().replace(/s$/, '')}s` as TimeTransform, column: m[2]! }),
  ],
  [new RegExp(`^bucket\\(\\s*(\\d+)\\s*,\\s*(${COLUMN})\\s*\\)$`, 'i'), (m) => ({ kind: 'bucket', buckets: Number(m[1]), column: m[2]! })],
  [new RegExp(`^truncate\\(\\s*(\\d+)\\s*,\\s*(${COLUMN})\\s*\\)$`, 'i'), (m) => ({ kind: 'truncate', width: Number(m[1]), column: m[2]! })],
];

const MAX_BUCKETS = 65_536;
const MAX_WIDTH = 1_000_000;

/** A partition field as written in the config, or what is wrong with it. */
export function parsePartitionField(text: string): PartitionField | { problem: string } {
  const t = text.trim();
  for (const [re, make] of FIELD_FORMS) {
    const m = t.match(re);
    if (!m) continue;
    const f = make(m);
    if (f.kind === 'bucket' && (f.buckets < 1 || f.buckets > MAX_BUCKETS)) return { problem: `bucket count ${f.buckets} is outside 1..${MAX_BUCKETS}` };
    if (f.kind === 'truncate' && (f.width < 1 || f.width > MAX_WIDTH)) return { problem: `truncate width ${f.width} is outside 1..${MAX_WIDTH}` };
    return f;
  }
  return {
    problem: `"${text}" is not a partition field: a column, years(c), months(c), days(c), hours(c), bucket(N, c) or truncate(W, c)`,
  };
}

/** The canonical text of a field: how Spark's DESCRIBE shows Iceberg's spec (identity: the column). */
export function partitionText(f: PartitionField): string {
  switch (f.kind) {
    case 'identity':
      return f.column;
    case 'bucket':
      return `bucket(${f.buckets}, ${f.column})`;
    case 'truncate':
      return `truncate(${f.width}, ${f.column})`;
    default:
      return `${f.kind}(${f.column})`;
  }
}

/** The field as the expression Spark's table writer reads as a partition transform. */
export function partitionExpr(f: PartitionField): Expr {
  switch (f.kind) {
    case 'identity':
      return col(f.column);
    case 'bucket':
      return fn('bucket', lit(f.buckets), col(f.column));
    case 'truncate':
      // Never sent: refused in tableShape (Spark's writer has no truncate transform).
      return fn('truncate', lit(f.width), col(f.column));
    default:
      return fn(f.kind, col(f.column));
  }
}

// ---------------------------------------------------------------------------------------------
// The allow-list

type Check = (value: string) => string | undefined;

const oneOf =
  (...values: string[]): Check =>
  (v) =>
    values.includes(v) ? undefined : `must be one of ${values.join(', ')}`;
const wholeNumber =
  (min: number, max: number): Check =>
  (v) =>
    /^\d+$/.test(v) && Number(v) >= min && Number(v) <= max ? undefined : `must be a whole number within ${min}..${max}`;
const bool = oneOf('true', 'false');
const interval: Check = (v) =>
  /^interval [1-9]\d{0,4} (hours|days|weeks)$/.test(v) ? undefined : 'must be an interval such as "interval 30 days" (hours, days or weeks)';

const MiB = 1024 * 1024;
const WRITE_MODE = oneOf('copy-on-write', 'merge-on-read');

/** The properties a tenant may set, per format, each with the check of its value. */
export const ALLOWED_PROPERTIES: Readonly<Record<Format, Readonly<Record<string, Check>>>> = {
  iceberg: {
    'format-version': oneOf('2', '3'),
    'write.merge.mode': WRITE_MODE,
    'write.update.mode': WRITE_MODE,
    'write.delete.mode': WRITE_MODE,
    'write.target-file-size-bytes': wholeNumber(MiB, 2048 * MiB),
    'write.distribution-mode': oneOf('none', 'hash', 'range'),
    'write.parquet.compression-codec': oneOf('zstd', 'snappy', 'gzip', 'lz4', 'uncompressed'),
    'write.parquet.row-group-size-bytes': wholeNumber(MiB, 1024 * MiB),
    'write.metadata.delete-after-commit.enabled': bool,
    'write.metadata.previous-versions-max': wholeNumber(1, 1000),
    'commit.retry.num-retries': wholeNumber(0, 20),
  },
  delta: {
    'delta.enableDeletionVectors': bool,
    'delta.enableChangeDataFeed': bool,
    'delta.checkpointInterval': wholeNumber(1, 1000),
    'delta.logRetentionDuration': interval,
    'delta.deletedFileRetentionDuration': interval,
    'delta.dataSkippingNumIndexedCols': wholeNumber(0, 256),
  },
};

/** Properties fixed when a table is created: a difference on an existing table is refused, never applied. */
export const CREATE_ONLY_PROPERTIES: readonly string[] = ['format-version'];
