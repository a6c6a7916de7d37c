import type { Field } from '../../spark/types.js';
import type { DatasetId } from './naming.js';

/**
 * OpenLineage run events (spec 2-0-2) and the standard facets this runner fills in. Pure: the
 * caller decides what goes in, and only names, types and ids ever do (no config literals, no
 * credentials, no row values).
 */

export const SPEC_URL = 'https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent';
const FACETS = 'https://openlineage.io/spec/facets';

export type EventType = 'START' | 'COMPLETE' | 'FAIL' | 'ABORT';

export interface ParentRef {
  readonly namespace: string;
  readonly name: string;
  readonly runId: string;
}

export interface RunIdentity {
  /** UUIDv7, the same for every event of the run. */
  readonly runId: string;
  readonly job: DatasetId;
  readonly parent?: ParentRef;
  readonly root?: ParentRef;
  /** The orchestrator's logical date, as the run's nominal start time. */
  readonly nominalTime?: string;
  /** Plain facts about the run (template, version, tenant, the orchestrator's run id). */
  readonly tags: readonly { readonly key: string; readonly value: string }[];
}

export interface ColumnInput {
  readonly dataset: DatasetId;
  readonly field: string;
  readonly transformation: 'IDENTITY' | 'TRANSFORMATION';
}

export interface EventDataset {
  readonly id: DatasetId;
  readonly symlink?: DatasetId;
  readonly fields?: readonly Field[];
  readonly columns?: Readonly<Record<string, readonly ColumnInput[]>>;
  /** An input's data quality checks and their outcomes (OpenLineage's data-quality assertions). */
  readonly assertions?: readonly Assertion[];
}

/** One check of an input dataset: its name, whether it held, and the column it judged (if one). */
export interface Assertion {
  readonly assertion: string;
  readonly success: boolean;
  readonly column?: string;
}

export interface EventEnd {
  /** For FAIL and ABORT: the error's code and exit code, never its free text (it may quote data). */
  readonly error?: { readonly message: string };
}

export interface Producer {
  readonly uri: string;
  readonly version: string;
}

function facet(producer: Producer, schema: string): { _producer: string; _schemaURL: string } {
  return { _producer: producer.uri, _schemaURL: `${FACETS}/${schema}` };
}

export function runEvent(
  type: EventType,
  at: Date,
  run: RunIdentity,
  datasets: { inputs: readonly EventDataset[]; outputs: readonly EventDataset[] },
  producer: Producer,
  end: EventEnd = {},
) {
  const runFacets: Record<string, unknown> = {
    processing_engine: {
      ...facet(producer, '1-1-1/ProcessingEngineRunFacet.json#/$defs/ProcessingEngineRunFacet'),
      name: 'lakehouse-jobs',
      version: producer.version,
    },
    tags: {
      ...facet(producer, '1-0-0/TagsRunFacet.json#/$defs/TagsRunFacet'),
      tags: run.tags.map((t) => ({ key: t.key, value: t.value, source: 'lakehouse-jobs' })),
    },
  };
  if (run.parent) {
    runFacets.parent = {
      ...facet(producer, '1-1-0/ParentRunFacet.json#/$defs/ParentRunFacet'),
      run: { runId: run.parent.runId },
      job: { namespace: run.parent.namespace, name: run.parent.name },
      ...(run.root ? { root: { run: { runId: run.root.runId }, job: { namespace: run.root.namespace, name: run.root.name } } } : {}),
    };
  }
  if (run.nominalTime)
    runFacets.nominalTime = { ...facet(producer, '1-0-1/NominalTimeRunFacet.json#/$defs/NominalTimeRunFacet'), nominalStartTime: run.nominalTime };
  if (end.error)
    runFacets.errorMessage = {
      ...facet(producer, '1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet'),
      message: end.error.message,
      programmingLanguage: 'TypeScript',
    };
  return {
    eventType: type,
    eventTime: at.toISOString(),
    producer: producer.uri,
    schemaURL: SPEC_URL,
    run: { runId: run.runId, facets: runFacets },
    job: {
      namespace: run.job.namespace,
      name: run.job.name,
      facets: {
        jobType: {
          ...facet(producer, '2-0-3/JobTypeJobFacet.json#/$defs/JobTypeJobFacet'),
          processingType: 'BATCH',
          integration: 'LAKEHOUSE_JOBS',
          jobType: 'JOB',
        },
      },
    },
    inputs: datasets.inputs.map((d) => {
      const input = dataset(d, producer);
      return d.assertions?.length
        ? {
            ...input,
            inputFacets: {
              dataQualityAssertions: {
                ...facet(producer, '1-1-0/DataQualityAssertionsDatasetFacet.json#/$defs/DataQualityAssertionsDatasetFacet'),
                assertions: d.assertions.map((a) => ({ assertion: a.assertion, success: a.success, ...(a.column ? { column: a.column } : {}) })),
              },
            },
          }
        : input;
    }),
    outputs: datasets.outputs.map((d) => dataset(d, producer)),
  };
}

export type RunEvent = ReturnType<typeof runEvent>;

function dataset(d: EventDataset, producer: Producer) {
  const facets: Record<string, unknown> = {};
  if (d.fields?.length)
    facets.schema = {
      ...facet(producer, '1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet'),
      fields: d.fields.map((f) => ({ name: f.name, type: f.type })),
    };
  if (d.symlink)
    facets.symlinks = {
      ...facet(producer, '1-0-1/SymlinksDatasetFacet.json#/$defs/SymlinksDatasetFacet'),
      identifiers: [{ namespace: d.symlink.namespace, name: d.symlink.name, type: 'TABLE' }],
    };
  if (d.columns && Object.keys(d.columns).length)
    facets.columnLineage = {
      ...facet(producer, '1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet'),
      fields: Object.fromEntries(
        Object.entries(d.columns).map(([field, inputs]) => [
          field,
          {
            inputFields: inputs.map((i) => ({
              namespace: i.dataset.namespace,
              name: i.dataset.name,
              field: i.field,
              transformations: [{ type: 'DIRECT', subtype: i.transformation, description: '', masking: false }],
            })),
          },
        ]),
      ),
    };
  return { namespace: d.id.namespace, name: d.id.name, facets };
}
