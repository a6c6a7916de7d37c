/**
 * The configs of "validate 1,000 configs": distinct, deterministic cdc-silver-merge v1 configs in the
 * styles tenants write (nested blocks, dotted keys, `:` or `=`, comments, env substitution), plus a
 * few invalid ones whose every problem a JSON Schema can also see, so ours and the peer must agree
 * on which files are invalid.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const TENANTS = ['acme', 'globex', 'initech', 'umbrella', 'hooli', 'stark', 'wayne', 'wonka', 'tyrell', 'cyberdyne'];
const TABLES = ['orders', 'customers', 'payments', 'shipments', 'invoices', 'events', 'users', 'products', 'refunds', 'sessions'];
const KEYS = ['id', 'order_id', 'customer_id', 'line_no', 'account_id', 'region', 'sku'];
const SEQUENCES = ['ts', 'updated_at', 'lsn', 'seq', 'commit_ts'];
const OPS = ['op', '_op', 'change_type'];
const DELETES = [['d'], ['D', 'delete'], ['DELETE'], ['d', 'x']];
const CATALOGS = [undefined, 'lake', 'spark_catalog'];

/** A small deterministic PRNG (mulberry32), so every run validates the same files. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Parts {
  tenant: string;
  root: string;
  name: string;
  source: string;
  where?: string;
  keys: string[];
  seq: string;
  op?: string;
  deletes?: string[];
  target: string;
  catalog?: string;
}

function parts(i: number, r: () => number): Parts {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const tenant = `${pick(TENANTS)}_${i}`;
  const table = pick(TABLES);
  const keys = [...KEYS].sort(() => r() - 0.5).slice(0, 1 + Math.floor(r() * 3));
  const seq = pick(SEQUENCES);
  const op = r() < 0.7 ? pick(OPS) : undefined;
  const catalog = pick(CATALOGS);
  const day = String(1 + (i % 28)).padStart(2, '0');
  const month = String(1 + (i % 12)).padStart(2, '0');
  const where = [undefined, `_snapshot_date = '2026-${month}-${day}'`, `region IN ('eu', 'us') AND _snapshot_date >= '2026-${month}-01'`][i % 3];
  return {
    tenant,
    root: r() < 0.6 ? `"file://"\${LAKEHOUSE_LAKE_HOME}"/${tenant}"` : `"s3a://lake-${i % 17}/tenants/${tenant}"`,
    name: `${tenant}-${table}-${i}`,
    source: `${table}_cdc`,
    ...(where ? { where } : {}),
    keys,
    seq,
    ...(op ? { op } : {}),
    ...(op && r() < 0.6 ? { deletes: pick(DELETES) } : {}),
    target: r() < 0.5 ? table : `${table}_v${1 + (i % 4)}`,
    ...(catalog ? { catalog } : {}),
  };
}

const list = (xs: readonly string[]) => `[${xs.map((x) => JSON.stringify(x)).join(', ')}]`;

/** Three layouts a tenant might write; all mean the same. */
function render(p: Parts, style: number): string {
  const cdc = [
    `primary-key = ${list(p.keys)}`,
    `sequence-by = "${p.seq}"`,
    ...(p.op ? [`op-column = ${p.op}`] : []),
    ...(p.deletes ? [`delete-values = ${list(p.deletes)}`] : []),
  ];
  const where = p.where ? `, where = ${JSON.stringify(p.where)}` : '';
  const catalog = p.catalog ? `, catalog = "${p.catalog}"` : '';
  if (style === 0)
    return `# cdc-silver-merge for ${p.tenant}
job    { template = "cdc-silver-merge", schema-version = 1, name = "${p.name}" }
tenant { id = "${p.tenant}", storage-root = ${p.root} }
source { table = "${p.source}"${where} }
cdc {
${cdc.map((l) => `  ${l}`).join('\n')}
}
target { table = "${p.target}"${catalog} }
`;
  if (style === 1)
    return `// dotted keys
job.template = cdc-silver-merge
job.schema-version = 1
job.name = "${p.name}"
tenant.id = ${p.tenant}
tenant.storage-root = ${p.root}
source.table = ${p.source}
${p.where ? `source.where = ${JSON.stringify(p.where)}\n` : ''}${cdc.map((l) => `cdc.${l}`).join('\n')}
target.table = ${p.target}
${p.catalog ? `target.catalog = ${p.catalog}\n` : ''}`;
  return `{
  "job": { "template": "cdc-silver-merge", "schema-version": 1, "name": "${p.name}" },
  "tenant": { "id": "${p.tenant}", "storage-root": ${p.root} },
  "source": { "table": "${p.source}"${where.replace(' = ', ': ').replace(', where', ', "where"')} },
  "cdc": {
${cdc.map((l) => `    ${l.replace(/^([a-z-]+) = /, '"$1": ')}`).join(',\n')}
  },
  "target": { "table": "${p.target}"${catalog.replace(', catalog = ', ', "catalog": ')} }
}
`;
}

/** Invalid configs: each breaks one rule the JSON Schema states too. */
const BREAKS: Array<[string, (text: string, p: Parts) => string]> = [
  ['tenant id in upper case', (t, p) => t.replace(`id = "${p.tenant}"`, `id = "${p.tenant.toUpperCase()}"`)],
  ['no sequence-by', (t) => t.replace(/\n\s*sequence-by = "[a-z_]+"/, '')],
  ['unknown key', (t, p) => t.replace(`target { table = "${p.target}"`, `target { tabel = "${p.target}"`)],
  ['empty primary key', (t) => t.replace(/primary-key = \[[^\]]*\]/, 'primary-key = []')],
  ['schema-version not a number', (t) => t.replace('schema-version = 1', 'schema-version = "one"')],
  ['source table with a dash', (t, p) => t.replace(`table = "${p.source}"`, `table = "${p.source.replace('_', '-')}"`)],
  ['storage root without a scheme', (t, p) => t.replace(`storage-root = ${p.root}`, `storage-root = "/lake/${p.tenant}"`)],
  ['no target', (t) => t.replace(/\ntarget \{[^}]*\}/, '')],
  ['key column with a space', (t) => t.replace(/primary-key = \["/, 'primary-key = ["order id", "')],
  ['unknown top-level key', (t) => `${t}schedule { cron = "0 3 * * *" }\n`],
];

export interface GeneratedConfigs {
  valid: string[];
  invalid: string[];
}

export function writeConfigs(dir: string, count: number, invalidCount: number): GeneratedConfigs {
  const r = rng(20260705);
  const out: GeneratedConfigs = { valid: [], invalid: [] };
  const seen = new Set<string>();
  for (let i = 0; i < count; i++) {
    const text = render(parts(i, r), i % 3);
    if (seen.has(text)) throw new Error(`config ${i} is a duplicate`);
    seen.add(text);
    const file = `job-${String(i).padStart(4, '0')}.conf`;
    writeFileSync(join(dir, file), text);
    out.valid.push(file);
  }
  for (let k = 0; k < invalidCount; k++) {
    const p = parts(count + k, r);
    const [what, breakIt] = BREAKS[k % BREAKS.length]!;
    const text = breakIt(render(p, 0), p);
    if (text === render(p, 0)) throw new Error(`invalid config ${k} (${what}) is unchanged`);
    const file = `bad-${String(k).padStart(2, '0')}.conf`;
    writeFileSync(join(dir, file), `# invalid: ${what}\n${text}`);
    out.invalid.push(file);
  }
  return out;
}
