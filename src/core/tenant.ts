import { type Layer, type TableName, layerNamespace, storagePath } from './naming.js';

/**
 * Who a job runs for, and where that tenant's data may live. Built once from a validated config;
 * templates derive every table name and path from it, never from raw strings.
 */
export interface TenantContext {
  readonly id: string;
  readonly storageRoot: string;
  /** `<storage-root>/<layer>/<table>` */
  location(layer: Layer, table: string): string;
  /** `<catalog>.<tenant>_<layer>.<table>` */
  table(catalog: string, layer: Layer, table: string): TableName;
  namespace(layer: Layer): string;
}

export function tenantContext(id: string, storageRoot: string): TenantContext {
  const root = storageRoot.replace(/\/+$/, '');
  return Object.freeze({
    id,
    storageRoot: root,
    location: (layer: Layer, table: string) => storagePath(root, layer, table),
    table: (catalog: string, layer: Layer, table: string) =>
      Object.freeze({ catalog, namespace: layerNamespace(id, layer), table }),
    namespace: (layer: Layer) => layerNamespace(id, layer),
  });
}

/**
 * Is `candidate` the same as, or below, one of `roots`? Compares normalised URIs segment by segment,
 * so `file:///lake/acme2` is not under `file:///lake/acme` and `..` cannot climb out.
 */
export function isUnderRoot(candidate: string, roots: readonly string[]): boolean {
  const c = normaliseUri(candidate);
  if (c === undefined) return false;
  return roots.some((root) => {
    const r = normaliseUri(root);
    return r !== undefined && (c === r || c.startsWith(r.endsWith('/') ? r : r + '/'));
  });
}

function normaliseUri(uri: string): string | undefined {
  const m = /^([a-z][a-z0-9+.-]*):\/\/([^/]*)(\/.*)?$/i.exec(uri);
  if (!m) return undefined;
  const [, scheme, authority, path = '/'] = m;
  const out: string[] = [];
  for (const seg of path.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') return undefined; // never accept climbing, even if it would stay inside
    out.push(seg);
  }
  return `${scheme!.toLowerCase()}://${authority!.toLowerCase()}/${out.join('/')}`;
}
