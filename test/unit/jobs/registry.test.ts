import { existsSync, readFileSync } from 'node:fs';
import { instant } from '../../../src/core/instant.js';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { templates } from '../../../src/jobs/registry.js';
import { defineTemplate, defineVersion, docsPath, examplePath } from '../../../src/jobs/kit.js';
import { name } from '../../../src/core/config/validate.js';
import { tenantContext } from '../../../src/core/tenant.js';
import type { JobContext } from '../../../src/jobs/template.js';
import { parseHocon, readHoconFile } from '../../../src/core/config/hocon.js';

/**
 * Every template of the catalog is written with the kit and comes with what a user needs: a
 * runnable example per schema version and a docs page naming every top-level key.
 */
const repo = fileURLToPath(new URL('../../../', import.meta.url));

describe('the catalog', () => {
  for (const t of templates) {
    describe(t.name, () => {
      it('has versions 1..N in order, each with its example under configs/examples/', () => {
        expect(t.versions.map((v) => v.version)).toEqual(t.versions.map((_, i) => i + 1));
        for (const v of t.versions) {
          expect(v.example).toBe(examplePath(t.name, v.version));
          expect(existsSync(join(repo, v.example)), `${v.example} is missing`).toBe(true);
        }
      });

      it('each example names its template and version and validates against that version (with the local platform config)', async () => {
        for (const v of t.versions) {
          const text = readFileSync(join(repo, v.example), 'utf8');
          expect(text).toMatch(new RegExp(`template\\s*=\\s*"${t.name}"`));
          expect(text).toMatch(new RegExp(`schema-version\\s*=\\s*${v.version}\\b`));
          const raw = await parseHocon([await readHoconFile(join(repo, v.example))], {
            env: { LAKEHOUSE_LAKE_HOME: '/lake' },
            envAllowList: (n) => n === 'LAKEHOUSE_LAKE_HOME',
            overrides: [],
          });
          const parsed = v.schema.safeParse(raw);
          expect(parsed.error?.issues ?? [], v.example).toEqual([]);
        }
      });

      it('refuses a target table named with "__", which the runner keeps for the tables it derives (<table>__quarantine, …)', async () => {
        for (const v of t.versions) {
          const raw = (await parseHocon([await readHoconFile(join(repo, v.example))], {
            env: { LAKEHOUSE_LAKE_HOME: '/lake' },
            envAllowList: (n) => n === 'LAKEHOUSE_LAKE_HOME',
            overrides: [],
          })) as { target?: { table?: unknown } };
          if (typeof raw.target?.table !== 'string') continue;
          for (const taken of [`${raw.target.table}__quarantine`, `${raw.target.table}__cdc_tombstones`, 'a__b']) {
            const parsed = v.schema.safeParse({ ...raw, target: { ...raw.target, table: taken } });
            expect(
              parsed.error?.issues.map((i) => i.path.join('.')),
              `${v.example}: ${taken}`,
            ).toEqual(['target.table']);
          }
          expect(v.schema.safeParse({ ...raw, target: { ...raw.target, table: 'orders_2026_v2_' } }).success, v.example).toBe(true);
        }
      });

      it(`has a docs page (${docsPath(t.name)}) covering every top-level key of the newest version`, () => {
        expect(t.docs).toBe(docsPath(t.name));
        const file = join(repo, t.docs);
        expect(existsSync(file), `${t.docs} is missing`).toBe(true);
        const page = readFileSync(file, 'utf8');
        const newest = t.versions.at(-1)!;
        const json = z.toJSONSchema(newest.schema, { io: 'input', unrepresentable: 'any' }) as {
          properties: Record<string, { properties?: Record<string, unknown> }>;
        };
        for (const [section, def] of Object.entries(json.properties)) {
          if (section === 'job' || section === 'tenant') continue;
          const keys = def.properties ? Object.keys(def.properties).map((k) => `${section}.${k}`) : [section];
          for (const k of keys) expect(page, `${t.docs} does not document ${k}`).toContain(`\`${k}\``);
        }
        for (const heading of ['## Semantics', '## Keys', '## Refusals', '## Idempotency', '## Limits']) expect(page).toContain(heading);
      });
    });
  }
});

const ctx: JobContext = {
  tenant: tenantContext('acme', 'file:///lake/acme'),
  runId: 'r',
  clock: instant(0n),
  catalog: (n) => ({ name: n ?? 'lake', format: 'iceberg' }),
  jdbcConnection: () => {
    throw new Error('unused');
  },
  kafkaCluster: () => {
    throw new Error('unused');
  },
  schemaRegistry: () => {
    throw new Error('unused');
  },
  inlineJdbcUrls: false,
  secret: () => {
    throw new Error('unused');
  },
};

describe('the kit', () => {
  const v2 = defineVersion(2, {
    sections: { thing: z.object({ table: name(), keys: z.array(z.string()).default([]) }).strict() },
    refine: (c, rc) => {
      if (c.thing.keys.includes(c.thing.table)) rc.addIssue({ code: 'custom', path: ['thing', 'keys'], message: 'must not name the table' });
    },
  });
  const v1 = defineVersion(1, { sections: { thing: z.object({ name: name() }).strict() } }).migrate((c) => ({
    tenant: c.tenant,
    thing: { table: c.thing.name, keys: [] },
  }));
  const seen: unknown[] = [];
  const t = defineTemplate({
    name: 'kit-test',
    layer: 'gold',
    summary: 'test',
    stability: 'experimental',
    newest: v2,
    older: [v1],
    plan: (_ctx, spec) => {
      seen.push(spec);
      return { steps: [] };
    },
  });
  const tenant = { id: 'acme', 'storage-root': 'file:///lake/acme' };

  it('adds the job and tenant sections, with the version literal it was given', () => {
    expect(t.versions.map((v) => v.version)).toEqual([1, 2]);
    expect(t.versions[1]!.schema.safeParse({ job: { 'schema-version': 2 }, tenant, thing: { table: 'orders' } }).success).toBe(true);
    const wrongVersion = t.versions[1]!.schema.safeParse({ job: { 'schema-version': 1 }, tenant, thing: { table: 'orders' } });
    expect(wrongVersion.success).toBe(false);
    const wrongTemplate = t.versions[1]!.schema.safeParse({ job: { template: 'other', 'schema-version': 2 }, tenant, thing: { table: 'orders' } });
    expect(wrongTemplate.success).toBe(false);
  });

  it('refuses unknown sections and runs the cross-section checks at their paths', () => {
    const unknown = t.versions[1]!.schema.safeParse({ job: { 'schema-version': 2 }, tenant, thing: { table: 'orders' }, extra: 1 });
    expect(unknown.success).toBe(false);
    const refined = t.versions[1]!.schema.safeParse({ job: { 'schema-version': 2 }, tenant, thing: { table: 'orders', keys: ['orders'] } });
    expect(refined.error?.issues.map((i) => i.path.join('.'))).toEqual(['thing.keys']);
  });

  it('migrates an older version into the newest spec: one plan function for every version', () => {
    seen.length = 0;
    const old = t.versions[0]!.schema.parse({ job: { 'schema-version': 1 }, tenant, thing: { name: 'orders' } });
    t.versions[0]!.plan(ctx, old);
    const now = t.versions[1]!.schema.parse({ job: { 'schema-version': 2 }, tenant, thing: { table: 'orders' } });
    t.versions[1]!.plan(ctx, now);
    expect(seen[0]).toEqual(seen[1]);
    expect(seen[0]).toEqual({ tenant, thing: { table: 'orders', keys: [] } });
  });

  it('refuses a version defined twice and a newest version that is not the highest', () => {
    const base = { name: 'x', layer: 'gold', summary: '', stability: 'experimental', plan: () => ({ steps: [] }) } as const;
    const sections = { thing: name() };
    const newest = defineVersion(2, { sections });
    const twice = defineVersion(2, { sections }).migrate((c) => ({ tenant: c.tenant, thing: c.thing }));
    expect(() => defineTemplate({ ...base, newest, older: [twice] })).toThrow(/defined twice/);
    const higher = defineVersion(3, { sections }).migrate((c) => ({ tenant: c.tenant, thing: c.thing }));
    expect(() => defineTemplate({ ...base, newest, older: [higher] })).toThrow(/highest/);
  });
});
