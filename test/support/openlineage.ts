/**
 * The OpenLineage 2-0-2 RunEvent contract and the standard facets this project emits, checked
 * field by field as the spec's JSON Schema (OpenLineage.json and spec/facets/*.json) states them:
 * required properties, types, formats (uuid, date-time, uri) and enums. Returns the problems, each
 * with its JSON path; none for a valid event.
 */

type Json = unknown;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const URI = /^[A-Za-z][A-Za-z0-9+.-]*:\S+$/;

export function openLineageProblems(event: Json): string[] {
  const out: string[] = [];
  const obj = (v: Json, path: string): Record<string, Json> | undefined => {
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) return v as Record<string, Json>;
    out.push(`${path}: must be an object`);
    return undefined;
  };
  const str = (
    o: Record<string, Json>,
    key: string,
    path: string,
    opts: { required?: boolean; format?: 'uuid' | 'date-time' | 'uri'; enum?: readonly string[] } = {},
  ) => {
    const v = o[key];
    if (v === undefined) {
      if (opts.required !== false) out.push(`${path}.${key}: is required`);
      return;
    }
    if (typeof v !== 'string') return void out.push(`${path}.${key}: must be a string`);
    if (opts.format === 'uuid' && !UUID.test(v)) out.push(`${path}.${key}: must be a uuid`);
    if (opts.format === 'date-time' && (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(v) || Number.isNaN(Date.parse(v))))
      out.push(`${path}.${key}: must be an RFC 3339 date-time`);
    if (opts.format === 'uri' && !URI.test(v)) out.push(`${path}.${key}: must be a uri`);
    if (opts.enum && !opts.enum.includes(v)) out.push(`${path}.${key}: must be one of ${opts.enum.join(', ')}`);
  };
  const arr = (o: Record<string, Json>, key: string, path: string, each: (v: Json, p: string) => void, required = true) => {
    const v = o[key];
    if (v === undefined) return void (required && out.push(`${path}.${key}: is required`));
    if (!Array.isArray(v)) return void out.push(`${path}.${key}: must be an array`);
    v.forEach((x, i) => each(x, `${path}.${key}[${i}]`));
  };
  const baseFacet = (f: Record<string, Json>, path: string) => {
    str(f, '_producer', path, { format: 'uri' });
    str(f, '_schemaURL', path, { format: 'uri' });
  };
  const facets = (v: Json, path: string, checks: Record<string, (f: Record<string, Json>, p: string) => void>) => {
    if (v === undefined) return;
    const o = obj(v, path);
    if (!o) return;
    for (const [name, f] of Object.entries(o)) {
      const fo = obj(f, `${path}.${name}`);
      if (!fo) continue;
      baseFacet(fo, `${path}.${name}`);
      checks[name]?.(fo, `${path}.${name}`);
    }
  };
  const jobRef = (v: Json, p: string) => {
    const o = obj(v, p);
    if (o) {
      str(o, 'namespace', p);
      str(o, 'name', p);
    }
  };
  const runRef = (v: Json, p: string) => {
    const o = obj(v, p);
    if (o) str(o, 'runId', p, { format: 'uuid' });
  };

  const runFacetChecks: Record<string, (f: Record<string, Json>, p: string) => void> = {
    parent: (f, p) => {
      runRef(f.run, `${p}.run`);
      jobRef(f.job, `${p}.job`);
      if (f.root !== undefined) {
        const r = obj(f.root, `${p}.root`);
        if (r) {
          runRef(r.run, `${p}.root.run`);
          jobRef(r.job, `${p}.root.job`);
        }
      }
    },
    nominalTime: (f, p) => {
      str(f, 'nominalStartTime', p, { format: 'date-time' });
      str(f, 'nominalEndTime', p, { required: false, format: 'date-time' });
    },
    errorMessage: (f, p) => {
      str(f, 'message', p);
      str(f, 'programmingLanguage', p);
      str(f, 'stackTrace', p, { required: false });
    },
    processing_engine: (f, p) => {
      str(f, 'version', p);
      str(f, 'name', p, { required: false });
      str(f, 'openlineageAdapterVersion', p, { required: false });
    },
    tags: (f, p) =>
      arr(f, 'tags', p, (t, tp) => {
        const o = obj(t, tp);
        if (o) {
          str(o, 'key', tp);
          str(o, 'value', tp);
          str(o, 'source', tp, { required: false });
        }
      }),
  };
  // DataQualityAssertionsDatasetFacet: assertions[] of { assertion (string), success (boolean), column? }.
  const inputFacetChecks: Record<string, (f: Record<string, Json>, p: string) => void> = {
    dataQualityAssertions: (f, p) =>
      arr(f, 'assertions', p, (x, xp) => {
        const o = obj(x, xp);
        if (!o) return;
        str(o, 'assertion', xp);
        if (typeof o.success !== 'boolean') out.push(`${xp}.success: must be a boolean`);
        str(o, 'column', xp, { required: false });
      }),
  };
  const datasetFacetChecks: Record<string, (f: Record<string, Json>, p: string) => void> = {
    schema: (f, p) =>
      arr(f, 'fields', p, (x, xp) => {
        const o = obj(x, xp);
        if (o) {
          str(o, 'name', xp);
          str(o, 'type', xp, { required: false });
          str(o, 'description', xp, { required: false });
        }
      }),
    symlinks: (f, p) =>
      arr(f, 'identifiers', p, (x, xp) => {
        const o = obj(x, xp);
        if (o) {
          str(o, 'namespace', xp);
          str(o, 'name', xp);
          str(o, 'type', xp);
        }
      }),
    columnLineage: (f, p) => {
      const fields = obj(f.fields, `${p}.fields`);
      for (const [name, v] of Object.entries(fields ?? {})) {
        const fp = `${p}.fields.${name}`;
        const o = obj(v, fp);
        if (!o) continue;
        arr(o, 'inputFields', fp, (x, xp) => {
          const i = obj(x, xp);
          if (!i) return;
          str(i, 'namespace', xp);
          str(i, 'name', xp);
          str(i, 'field', xp);
          arr(
            i,
            'transformations',
            xp,
            (t, tp) => {
              const to = obj(t, tp);
              if (!to) return;
              str(to, 'type', tp, { enum: ['DIRECT', 'INDIRECT'] });
              str(to, 'subtype', tp, { required: false });
              str(to, 'description', tp, { required: false });
              if (to.masking !== undefined && typeof to.masking !== 'boolean') out.push(`${tp}.masking: must be a boolean`);
            },
            false,
          );
        });
      }
    },
  };

  const e = obj(event, '$');
  if (!e) return out;
  str(e, 'eventTime', '$', { format: 'date-time' });
  str(e, 'producer', '$', { format: 'uri' });
  str(e, 'schemaURL', '$', { format: 'uri' });
  str(e, 'eventType', '$', { required: false, enum: ['START', 'RUNNING', 'COMPLETE', 'ABORT', 'FAIL', 'OTHER'] });
  const run = obj(e.run, '$.run');
  if (run) {
    str(run, 'runId', '$.run', { format: 'uuid' });
    facets(run.facets, '$.run.facets', runFacetChecks);
  }
  const job = obj(e.job, '$.job');
  if (job) {
    str(job, 'namespace', '$.job');
    str(job, 'name', '$.job');
    facets(job.facets, '$.job.facets', {
      jobType: (f, p) => {
        str(f, 'processingType', p, { enum: ['BATCH', 'STREAMING'] });
        str(f, 'integration', p);
        str(f, 'jobType', p, { required: false });
      },
    });
  }
  for (const side of ['inputs', 'outputs'] as const)
    arr(
      e,
      side,
      '$',
      (d, p) => {
        const o = obj(d, p);
        if (!o) return;
        str(o, 'namespace', p);
        str(o, 'name', p);
        facets(o.facets, `${p}.facets`, datasetFacetChecks);
        facets(
          o[side === 'inputs' ? 'inputFacets' : 'outputFacets'],
          `${p}.${side === 'inputs' ? 'inputFacets' : 'outputFacets'}`,
          side === 'inputs' ? inputFacetChecks : {},
        );
      },
      false,
    );
  return out;
}
