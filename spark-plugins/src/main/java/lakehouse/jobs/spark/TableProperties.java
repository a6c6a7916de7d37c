package lakehouse.jobs.spark;

import java.util.Locale;
import java.util.Set;

/**
 * The table properties a bound session may set, create or unset: the tenant's allow-list
 * (src/jobs/partition-spec.ts, docs/table-shape.md) and the runner's own (`location`, judged as a
 * path; the incremental read marker). The runner checks keys and values before it sends a plan;
 * the server holds the keys again, so a property that moves a table's files (`write.data.path`,
 * `write.object-storage.path`, …) or one a new format version adds never reaches a tenant's table
 * by a bug of the runner. test/unit/spark/table-properties.test.ts holds this list and the
 * runner's together.
 */
final class TableProperties {
  private TableProperties() {}

  private static final Set<String> ALLOWED = Set.of(
      // The runner's own.
      "location", "lakehouse-jobs.read",
      // The run ledger's table (src/runner/job-runs.ts): its appends only insert, so they need not conflict.
      "write.merge.isolation-level",
      // Iceberg.
      "format-version", "write.merge.mode", "write.update.mode", "write.delete.mode", "write.target-file-size-bytes",
      "write.distribution-mode", "write.parquet.compression-codec", "write.parquet.row-group-size-bytes",
      "write.metadata.delete-after-commit.enabled", "write.metadata.previous-versions-max", "commit.retry.num-retries",
      // Delta.
      "delta.enableDeletionVectors", "delta.enableChangeDataFeed", "delta.checkpointInterval", "delta.logRetentionDuration",
      "delta.deletedFileRetentionDuration", "delta.dataSkippingNumIndexedCols");

  private static final Set<String> LOWER = lower();

  private static Set<String> lower() {
    return Set.copyOf(ALLOWED.stream().map(k -> k.toLowerCase(Locale.ROOT)).toList());
  }

  /** Delta reads its keys case-insensitively: so does this check. */
  static boolean allowed(String key) {
    return key != null && LOWER.contains(key.toLowerCase(Locale.ROOT));
  }
}
