/**
 * Tenancy and naming (docs/contracts.md). Everything that becomes part of a Spark identifier or a storage
 * path passes through here: names are validated against strict patterns, then always quoted, so a
 * config value can never change the shape of a statement.
 */

/** Tenant ids, table and namespace parts chosen by tenants: lower snake case. */
export const NAME_PATTERN = /^[a-z][a-z0-9_]*$/;
/**
 * A table a template writes: a NAME_PATTERN without `__`, which the runner keeps for the tables it
 * derives from one (`<table>__quarantine`, `<table>__cdc_tombstones`), so no job's table is ever
 * another's companion.
 */
export const TABLE_NAME_PATTERN = /^[a-z][a-z0-9]*(?:_[a-z0-9]+)*_?$/;
/** Source column names may carry upper case (JDBC sources, CDC tools). */
export const COLUMN_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Catalog names configured by the platform. */
export const CATALOG_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

export const LAYERS = ['bronze', 'silver', 'gold'] as const;
export type Layer = (typeof LAYERS)[number];

/** Backtick-quote one identifier part (backticks inside are doubled, per Spark SQL). */
export function quoteIdentifier(part: string): string {
  return '`' + part.replaceAll('`', '``') + '`';
}

/** A multi-part name, quoted part by part: `lake`.`acme_silver`.`orders`. */
export function quoteName(parts: readonly string[]): string {
  return parts.map(quoteIdentifier).join('.');
}

/** The namespace of a tenant's layer: `acme_silver`. */
export function layerNamespace(tenantId: string, layer: Layer): string {
  return `${tenantId}_${layer}`;
}

export interface TableName {
  readonly catalog: string;
  readonly namespace: string;
  readonly table: string;
}

export function tableParts(name: TableName): string[] {
  return [name.catalog, name.namespace, name.table];
}

/** `catalog.namespace.table`, unquoted, for status documents and logs. */
export function displayTable(name: TableName): string {
  return tableParts(name).join('.');
}

/** `<storage-root>/<layer>/<table>[/<segment>…]`, with exactly one slash at each join. */
export function storagePath(storageRoot: string, layer: Layer, table: string, ...segments: string[]): string {
  // A file system's root (file:///) keeps its slash; any other root gets exactly one.
  const base = storageRoot.endsWith(':///') ? storageRoot : `${storageRoot.replace(/\/+$/, '')}/`;
  return base + [layer, table, ...segments].join('/');
}

/*
 * Literal storage URIs. Spark hands paths to Hadoop, which expands glob syntax ({a,b}, [a-z], *, ?),
 * unescapes backslashes and decodes percent-escapes: `…/acme/{x,../beta}` reads another tenant's
 * data although no segment is "..". So a storage URI is accepted only from a conservative alphabet,
 * in which nothing is special to Hadoop, and compared only after normalisation.
 */

/**
 * One path segment: letters, digits and `_ - . = + @ ~`, not ending with a dot; a single leading dot
 * is allowed (hidden folders such as `.cache`), but never `.`, `..` or any other run of dots.
 */
export const PATH_SEGMENT_PATTERN = /^\.?[A-Za-z0-9_=+@~-](?:[A-Za-z0-9_.=+@~-]*[A-Za-z0-9_=+@~-])?$/;
/** `bucket`, `container@account.dfs.core.windows.net`, `host:8020`. */
const AUTHORITY_PATTERN = /^(?:[A-Za-z0-9_-](?:[A-Za-z0-9._-]*[A-Za-z0-9_-])?@)?[A-Za-z0-9_-](?:[A-Za-z0-9._-]*[A-Za-z0-9_-])?(?::[0-9]{1,5})?$/;
/** The shape as a JSON Schema pattern (the checks below give the precise reason). */
export const STORAGE_URI_PATTERN = /^[A-Za-z][A-Za-z0-9+.-]*:(\/\/[A-Za-z0-9_@:.-]*)?(\/[A-Za-z0-9_.=+@~-]+)*\/?$/;
const MAX_URI_LENGTH = 1024;

type Parsed = { uri: string } | { problem: string };

/**
 * Why `uri` is not a literal storage URI, or its normal form: lower-case scheme and authority, no
 * trailing slash, `file:/x` (as Spark reports locations) and `file:///x` (as configs write them)
 * both as `file:///x`.
 */
export function parseStorageUri(uri: string): Parsed {
  if (uri.length > MAX_URI_LENGTH) return { problem: `must be at most ${MAX_URI_LENGTH} characters` };
  // eslint-disable-next-line no-control-regex
  if (/[\s\u0000-\u001f\u007f]/.test(uri)) return { problem: 'must not contain whitespace or control characters' };
  if (/[{}[\]*?\\]/.test(uri)) return { problem: 'must not contain glob or escape characters ({ } [ ] * ? \\): Spark would expand them into other paths' };
  if (uri.includes('%')) return { problem: 'must not contain percent-encoding (%): paths are compared literally' };
  if (/[^\x20-\x7e]/.test(uri)) return { problem: 'must be plain ASCII (look-alikes such as a fullwidth solidus are refused)' };
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):(?:\/\/([^/]*))?(\/.*)?$/.exec(uri);
  const [, rawScheme, authority, path] = m ?? [];
  const scheme = rawScheme?.toLowerCase();
  // Only file: may omit the authority (`file:/lake`, Spark's own spelling).
  if (!m || scheme === undefined || (authority === undefined && scheme !== 'file') || (authority === undefined && path === undefined))
    return { problem: 'must be an absolute URI such as s3a://bucket/tenant or file:///lake/tenant, without quotes or spaces' };
  if (authority !== undefined && authority !== '' && !AUTHORITY_PATTERN.test(authority))
    return { problem: `has an invalid authority "${authority}" (letters, digits, _ - . and an optional user@ and :port)` };
  if (authority === '' && scheme !== 'file') return { problem: `needs a bucket or host after ${scheme}://` };
  const segments = (path ?? '').replace(/\/$/, '').split('/').slice(1);
  if (path === '/') segments.length = 0;
  for (const seg of segments) {
    if (seg === '') return { problem: 'must not contain empty segments (//)' };
    if (seg === '.' || seg === '..') return { problem: `must not contain "${seg}" segments` };
    if (!PATH_SEGMENT_PATTERN.test(seg))
      return { problem: `has an invalid segment "${seg}": letters, digits and _ - . = + @ ~ only, not ending with a dot nor starting with two` };
  }
  if (scheme === 'file' && !authority && path === undefined) return { problem: 'needs a path after file://, e.g. file:///lake/tenant' };
  const base = `${scheme}://${(authority ?? '').toLowerCase()}`;
  // The file system's root keeps its slash (file:///); everything else has none at the end.
  return { uri: segments.length ? `${base}/${segments.join('/')}` : scheme === 'file' ? `${base}/` : base };
}

/** The normal form of a literal storage URI, or undefined when it is not one. */
export function normaliseStorageUri(uri: string): string | undefined {
  const r = parseStorageUri(uri);
  return 'uri' in r ? r.uri : undefined;
}

/** Why `uri` is not a literal storage URI (undefined when it is one). */
export function storageUriProblem(uri: string): string | undefined {
  const r = parseStorageUri(uri);
  return 'problem' in r ? r.problem : undefined;
}

/**
 * The form in which two literal storage URIs are compared: the normal form, with `s3://` read as
 * `s3a://`. Both name one bucket through Hadoop's S3A connector (the stack maps `s3` to it, as EMR's
 * and most platforms' settings do), so a root written one way and a location a catalog reports the
 * other way are one place, and a tenant cannot reach a second copy of a root by the other scheme.
 */
export function comparableStorageUri(uri: string): string | undefined {
  const n = normaliseStorageUri(uri);
  return n?.startsWith('s3://') ? `s3a://${n.slice('s3://'.length)}` : n;
}

/** Do two locations name the same place? Non-literal ones (as a catalog may report) only when identical. */
export function sameLocation(a: string, b: string): boolean {
  const na = comparableStorageUri(a);
  const nb = comparableStorageUri(b);
  return na !== undefined && nb !== undefined ? na === nb : a === b;
}
