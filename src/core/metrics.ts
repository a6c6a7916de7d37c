/**
 * Every metric a status document may carry under `outputs[].metrics`, with what it means. One name
 * means one thing in every template (docs/contracts.md lists this table; a unit test holds the two
 * together, and the integration tests' CLI runs check each status they get against it).
 * `<column>` stands for a column name.
 */
export const OUTPUT_METRICS = {
  inserted: 'rows the run inserted into the table (scd2-dim-load: versions added; the vault loaders: hub keys, links or satellite rows)',
  updated: 'rows the run changed in place (scd2-dim-load: versions closed or rewritten)',
  deleted: 'rows the run deleted (cdc-silver-merge: keys whose delete it applied; scd2-dim-load: versions merged away by a late change)',
  late: 'cdc-silver-merge: events not applied because the table or a tombstone holds the key at a newer or equal position',
  repaired: 'cdc-silver-merge: rows another run brought back after their delete, which this run deleted again',
  candidates: 'the vault loaders: the distinct keys (hub, link) or changes (satellite) read from the source that the load considered',
  ghost: 'the vault loaders: 1 when this run inserted the ghost record',
  rows: "gold-publish: rows the transform produced, before the expectations' actions",
  written: 'gold-publish: rows this run wrote to the table (0 when it wrote nothing)',
  dropped: 'gold-publish: rows a `drop` expectation kept out of the table',
  quarantined: 'gold-publish: rows a `quarantine` expectation wrote to the quarantine table instead',
  dates:
    'gold-publish with `source.read`: the dates of the range column the run recomputed and replaced (those the new source commits touched; a full read: those the result has)',
  rowsWritten: 'the ingest templates: records this run wrote to the table or files',
  batches: "kafka-bronze-ingest: this run's micro-batches that read at least one record",
  undecodable: 'kafka-bronze-ingest: records kept raw because their value could not be parsed',
  'nulled.<column>': "kafka-bronze-ingest: values that did not fit the column's declared type, kept NULL (`on-type-mismatch = set-null`)",
  dataFiles: 'iceberg-zero-copy-append: data files appended by reference',
  deleteFiles: 'iceberg-zero-copy-append: position delete files appended with them',
  records: 'iceberg-zero-copy-append: rows in the appended data files, before position deletes',
  alreadyAppended: "iceberg-zero-copy-append: 1 when an earlier run had appended the source's files (nothing appended now)",
  filesBefore: "table-maintenance: the table's data and delete files before the run",
  filesAfter: "table-maintenance: the table's data and delete files after the run",
  bytesBefore: "table-maintenance: the bytes of the table's files before the run",
  bytesAfter: "table-maintenance: the bytes of the table's files after the run",
  snapshotsBefore: "table-maintenance: the Iceberg table's snapshots before the run",
  snapshotsAfter: "table-maintenance: the Iceberg table's snapshots after the run",
  snapshotsExpirable: 'table-maintenance: snapshots older than the cut-off and not among the newest `retain-last` when the run started',
  orphanFiles: "table-maintenance: files under the table's location that no snapshot references, older than the cut-off (what remove_orphan_files removes)",
  vacuumFiles: 'table-maintenance: files VACUUM deletes (its dry run listed them)',
  ageSeconds:
    "freshness-check: the table's age when the run started, in seconds: since its latest commit, or since the newest value of its event-time column (absent when it has none)",
  maxAgeSeconds: "freshness-check: the table's configured max-age, in seconds",
  daysCompared: 'reconcile: the days either the table or its source has rows on (within compare.from and compare.to)',
  daysDiffering: 'reconcile: the days whose row count or a sum differs between the table and its source beyond the tolerance',
  tableRows: "reconcile: the table's rows on the days compared",
  sourceRows: "reconcile: the source's rows on the days compared",
} as const satisfies Record<string, string>;

const PATTERNS = Object.keys(OUTPUT_METRICS)
  .filter((k) => k.endsWith('.<column>'))
  .map((k) => k.slice(0, -'<column>'.length));

/** Whether a metric's name is one of OUTPUT_METRICS (`nulled.<column>` matches `nulled.` and a column). */
export function isOutputMetric(name: string): boolean {
  return (Object.hasOwn(OUTPUT_METRICS, name) && !name.endsWith('<column>')) || PATTERNS.some((p) => name.length > p.length && name.startsWith(p));
}
