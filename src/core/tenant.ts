import { ConfigError } from './errors.js';
import {
  type Layer,
  type TableName,
  PATH_SEGMENT_PATTERN,
  comparableStorageUri,
  layerNamespace,
  normaliseStorageUri,
  storagePath,
  storageUriProblem,
} from './naming.js';

/**
 * Who a job runs for, and where that tenant's data may live. Built once from a validated config;
 * templates derive every table name and path from it, never from raw strings.
 */
export interface TenantContext {
  readonly id: string;
  /** The storage root, normalised (src/core/naming.ts `parseStorageUri`). */
  readonly storageRoot: string;
  /**
   * `<storage-root>/<layer>/<table>[/<segment>…]`, checked again to be a literal path under the
   * storage root (a ConfigError otherwise): whatever a template joins, nothing can widen or escape it.
   */
  location(layer: Layer, table: string, ...segments: string[]): string;
  /** `<catalog>.<tenant>_<layer>.<table>` */
  table(catalog: string, layer: Layer, table: string): TableName;
  namespace(layer: Layer): string;
}

export function tenantContext(id: string, storageRoot: string): TenantContext {
  const root = normaliseStorageUri(storageRoot);
  if (root === undefined) throw new ConfigError([{ path: 'tenant.storage-root', message: storageUriProblem(storageRoot) ?? 'is not a storage URI' }]);
  return Object.freeze({
    id,
    storageRoot: root,
    location: (layer: Layer, table: string, ...segments: string[]) => {
      const path = storagePath(root, layer, table, ...segments);
      // Defence in depth: the parts were validated, but a path is only used if it is still literal,
      // already normal and strictly below the root.
      const oneSegmentEach = [table, ...segments].every((s) => PATH_SEGMENT_PATTERN.test(s));
      if (!oneSegmentEach || normaliseStorageUri(path) !== path || path === root || !isUnderRoot(path, [root]))
        throw new ConfigError([
          { path: 'tenant.storage-root', message: `the path ${JSON.stringify(path)} built from the config is not a literal path under ${root}` },
        ]);
      return path;
    },
    table: (catalog: string, layer: Layer, table: string) => Object.freeze({ catalog, namespace: layerNamespace(id, layer), table }),
    namespace: (layer: Layer) => layerNamespace(id, layer),
  });
}

/**
 * Is `candidate` the same as, or below, one of `roots`? Both must be literal storage URIs; they are
 * compared normalised (`s3://` as `s3a://`), segment by segment, so `file:///lake/acme2` is not under `file:///lake/acme`
 * and nothing (`..`, globs, escapes) can climb out.
 */
export function isUnderRoot(candidate: string, roots: readonly string[]): boolean {
  const c = comparableStorageUri(candidate);
  if (c === undefined) return false;
  return roots.some((root) => {
    const r = comparableStorageUri(root);
    return r !== undefined && (c === r || c.startsWith(r.endsWith('/') ? r : r + '/'));
  });
}
