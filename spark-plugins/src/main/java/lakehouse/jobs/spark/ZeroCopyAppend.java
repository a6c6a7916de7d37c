package lakehouse.jobs.spark;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DataFiles;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileContent;
import org.apache.iceberg.FileMetadata;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.HasTableOperations;
import org.apache.iceberg.Metrics;
import org.apache.iceberg.PartitionField;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableMetadata;
import org.apache.iceberg.exceptions.CommitFailedException;
import org.apache.iceberg.exceptions.ValidationException;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.spark.Spark3Util;
import org.apache.iceberg.types.Types;
import org.apache.iceberg.util.SnapshotUtil;
import org.apache.spark.sql.SparkSession;

/**
 * Appends a source Iceberg table's live files (its current snapshot's data files and the position
 * delete files that apply to them) to a target Iceberg table by metadata only: one commit, no data
 * read or written. Every precondition is checked first (`inspect`); `commit` checks again on the
 * state it commits and refuses with a CommitFailedException (retryable) if anything changed.
 */
final class ZeroCopyAppend {
  static final String MARKER_UUID = "lakehouse-jobs.zero-copy.source-table-uuid";
  static final String MARKER_SNAPSHOT = "lakehouse-jobs.zero-copy.source-snapshot-id";
  static final String MARKER_TABLE = "lakehouse-jobs.zero-copy.source-table";
  static final String MARKER_RUN = "lakehouse-jobs.zero-copy.run-id";

  /** What the checks found; every field is a fact, the runner decides what it means. */
  static final class Findings {
    boolean sourceExists;
    boolean targetExists;
    String sourceUuid;
    String sourceLocation;
    String targetLocation;
    Long sourceSnapshotId;
    Long targetSnapshotId;
    long dataFiles;
    long positionDeleteFiles;
    long equalityDeleteFiles;
    long records;
    boolean alreadyAppended;
    String schemaProblem;
    String lastColumnIdProblem;
    String specProblem;
    String formatProblem;
    /** The source changed since the target appended it in a way that cannot be told apart from what it holds. */
    String sourceChangedProblem;
    /** How many locations (the table's, its files') lie outside the allowed roots; never which: they may be another tenant's. */
    long outsideRoots;
    final List<DataFile> data = new ArrayList<>();
    final List<DeleteFile> deletes = new ArrayList<>();

    boolean refused() {
      return !sourceExists || !targetExists || schemaProblem != null || lastColumnIdProblem != null || specProblem != null
          || formatProblem != null || sourceChangedProblem != null || equalityDeleteFiles > 0 || outsideRoots > 0;
    }
  }

  private ZeroCopyAppend() {}

  static Table load(SparkSession spark, String name) {
    try {
      Table t = Spark3Util.loadIcebergTable(spark, name);
      t.refresh();
      return t;
    } catch (org.apache.spark.sql.catalyst.analysis.NoSuchTableException | org.apache.iceberg.exceptions.NoSuchTableException e) {
      return null;
    } catch (org.apache.spark.sql.catalyst.parser.ParseException e) {
      throw new IllegalArgumentException("not a table name: " + name, e);
    }
  }

  static Findings inspect(SparkSession spark, ZeroCopyRequest req) {
    Findings f = new Findings();
    Table source = load(spark, req.source);
    Table target = load(spark, req.target);
    f.sourceExists = source != null;
    f.targetExists = target != null;
    if (source == null || target == null) return f;
    inspect(source, target, Roots.of(req.allowedRoots), f);
    return f;
  }

  private static void inspect(Table source, Table target, List<String> roots, Findings f) {
    f.sourceUuid = source.uuid().toString();
    f.sourceLocation = source.location();
    f.targetLocation = target.location();
    Snapshot current = source.currentSnapshot();
    f.sourceSnapshotId = current == null ? null : current.snapshotId();
    f.targetSnapshotId = target.currentSnapshot() == null ? null : target.currentSnapshot().snapshotId();

    TableMetadata sm = ((HasTableOperations) source).operations().current();
    TableMetadata tm = ((HasTableOperations) target).operations().current();
    if (sm.formatVersion() > 2 || tm.formatVersion() > 2)
      f.formatProblem = "format version " + sm.formatVersion() + " (source) and " + tm.formatVersion()
          + " (target): only format versions 1 and 2 are supported (v3 deletion vectors and row lineage are not)";
    f.schemaProblem = schemaDifference(source.schema().asStruct(), target.schema().asStruct());
    if (sm.lastColumnId() > tm.lastColumnId())
      f.lastColumnIdProblem = "the source has assigned field ids up to " + sm.lastColumnId() + ", the target only up to " + tm.lastColumnId()
          + " (the source dropped columns): a column the target adds later would reuse a dropped column's id and read its values";
    check(source.location(), roots, f);
    if (current == null) return;

    // A source the target appended before: only what the source's appends added since is new (the
    // files live at that snapshot are in the target already). Anything else since (an overwrite, a
    // delete, a compaction, a rollback, the snapshot expired) leaves no way to tell those rows apart.
    Long appendedAt = lastAppended(target, f.sourceUuid);
    Set<String> held = new HashSet<>();
    if (appendedAt != null && appendedAt == current.snapshotId()) f.alreadyAppended = true;
    else if (appendedAt != null) {
      f.sourceChangedProblem = changeSince(source, appendedAt, current);
      if (f.sourceChangedProblem != null) return;
      try (CloseableIterable<FileScanTask> tasks = source.newScan().useSnapshot(appendedAt).planFiles()) {
        for (FileScanTask task : tasks) held.add(task.file().location());
      } catch (java.io.IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    }
    PartitionSpec targetSpec = target.spec();
    Map<String, DeleteFile> deletes = new LinkedHashMap<>();
    TreeSet<String> specProblems = new TreeSet<>();
    try (CloseableIterable<FileScanTask> tasks = source.newScan().useSnapshot(current.snapshotId()).planFiles()) {
      for (FileScanTask task : tasks) {
        DataFile file = task.file();
        if (held.contains(file.location())) continue;
        f.dataFiles++;
        f.records += file.recordCount();
        check(file.location(), roots, f);
        String specProblem = specDifference(source.specs().get(file.specId()), targetSpec);
        if (specProblem != null) specProblems.add(specProblem);
        else f.data.add(dataFile(file, targetSpec));
        for (DeleteFile d : task.deletes()) deletes.putIfAbsent(d.location(), d);
      }
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
    for (DeleteFile d : deletes.values()) {
      check(d.location(), roots, f);
      if (d.content() == FileContent.EQUALITY_DELETES) {
        f.equalityDeleteFiles++;
        continue;
      }
      f.positionDeleteFiles++;
      String specProblem = specDifference(source.specs().get(d.specId()), targetSpec);
      if (specProblem != null) specProblems.add(specProblem);
      else if (d.contentOffset() != null) f.formatProblem = "the source has deletion vectors (format v3), which are not supported";
      else f.deletes.add(positionDeletes(d, targetSpec));
    }
    if (!specProblems.isEmpty()) f.specProblem = String.join("; ", specProblems);
    // Appends since, all of them empty: nothing new, the rerun of an append.
    if (!held.isEmpty() && f.dataFiles == 0) f.alreadyAppended = true;
  }

  /**
   * Why the source's history from the snapshot the target holds to its current one is not appends
   * only, or null when it is (every row added since is in a file added since).
   */
  private static String changeSince(Table source, long appendedAt, Snapshot current) {
    String held = "the target holds the source as of its snapshot " + appendedAt;
    if (source.snapshot(appendedAt) == null)
      return held + ", which the source no longer has (expired): what it added since cannot be told from what the target holds";
    if (!SnapshotUtil.isAncestorOf(source, current.snapshotId(), appendedAt))
      return held + ", which is not in the history of its current snapshot " + current.snapshotId() + " (rolled back or replaced)";
    for (Snapshot s : SnapshotUtil.ancestorsBetween(current.snapshotId(), appendedAt, source::snapshot))
      if (!"append".equals(s.operation()))
        return held + "; the source's snapshot " + s.snapshotId() + " since is no append (operation " + s.operation()
            + "): appending its files would put rows the target already holds into it a second time";
    return null;
  }

  /** Commit the append, after checking again on the state committed; returns the target's new snapshot id or null. */
  static Long commit(SparkSession spark, ZeroCopyRequest req) {
    Findings f = inspect(spark, req);
    if (f.refused())
      throw new CommitFailedException("zero-copy append refused: the tables changed since they were checked; run again to see why");
    if (f.sourceSnapshotId == null || f.dataFiles == 0 || f.alreadyAppended) return null;
    Table target = load(spark, req.target);
    // One row delta, data only or with the position deletes: data and deletes in one snapshot share
    // its sequence number, so the deletes apply to these files (position deletes apply at equal
    // sequence numbers) and, by path, only to them. Its commit is valid only on the target as
    // checked: Iceberg retries a commit that lost the race on the new head without asking again, so
    // a fast append of two runs at once (an orchestrator's retry beside the run it retries) put the
    // files in twice, each run having found no marker. Data added to the target since the checked
    // snapshot (the other run's append among them) now fails the commit, on every retry.
    RowDelta update = target.newRowDelta();
    f.data.forEach(update::addRows);
    f.deletes.forEach(update::addDeletes);
    if (f.targetSnapshotId != null) update.validateFromSnapshot(f.targetSnapshotId);
    update.validateNoConflictingDataFiles();
    update.set(MARKER_UUID, f.sourceUuid);
    update.set(MARKER_SNAPSHOT, Long.toString(f.sourceSnapshotId));
    update.set(MARKER_TABLE, req.source);
    if (!req.runId.isEmpty()) update.set(MARKER_RUN, req.runId);
    // What Spark's own Iceberg writes put into a summary (the runner's run id, job, logical date).
    String prefix = "spark.sql.iceberg.snapshot-property.";
    for (var e : scala.jdk.javaapi.CollectionConverters.asJava(spark.conf().getAll()).entrySet())
      if (e.getKey().startsWith(prefix)) update.set(e.getKey().substring(prefix.length()), e.getValue());
    try {
      update.commit();
    } catch (ValidationException e) {
      throw new CommitFailedException(e, "zero-copy append refused: the target received data since it was checked; run again to see why");
    }
    target.refresh();
    return target.currentSnapshot().snapshotId();
  }

  /** The source snapshot the newest marker of this source in the target's history records, or null (never appended). */
  private static Long lastAppended(Table target, String uuid) {
    Snapshot head = target.currentSnapshot();
    if (head == null) return null;
    for (Snapshot s : SnapshotUtil.ancestorsOf(head.snapshotId(), target::snapshot)) {
      Map<String, String> summary = s.summary();
      if (summary != null && uuid.equals(summary.get(MARKER_UUID)) && summary.get(MARKER_SNAPSHOT) != null)
        return Long.parseLong(summary.get(MARKER_SNAPSHOT));
    }
    return null;
  }

  /**
   * The first difference between two schemas by field id (name, type, nullability, nesting), or
   * null when they are identical: Iceberg reads a data file's columns by the ids written in it.
   */
  static String schemaDifference(Types.StructType source, Types.StructType target) {
    Map<Integer, Types.NestedField> s = index(source, "", new LinkedHashMap<>());
    Map<Integer, Types.NestedField> t = index(target, "", new LinkedHashMap<>());
    Map<Integer, String> sPath = paths(source, "", new LinkedHashMap<>());
    Map<Integer, String> tPath = paths(target, "", new LinkedHashMap<>());
    for (var e : s.entrySet()) {
      Types.NestedField tf = t.get(e.getKey());
      Types.NestedField sf = e.getValue();
      String where = "field id " + e.getKey() + " (source column " + sPath.get(e.getKey()) + ")";
      if (tf == null) return where + " is not in the target" + byName(tPath, sPath.get(e.getKey()));
      if (!sPath.get(e.getKey()).equals(tPath.get(e.getKey()))) return where + " is column " + tPath.get(e.getKey()) + " in the target";
      if (sf.type().isPrimitiveType() != tf.type().isPrimitiveType() || (sf.type().isPrimitiveType() && !sf.type().equals(tf.type())))
        return where + " is " + sf.type() + " in the source and " + tf.type() + " in the target";
      if (sf.isOptional() != tf.isOptional()) return where + " is " + (sf.isOptional() ? "optional" : "required") + " in the source, not in the target";
    }
    for (var e : t.entrySet())
      if (!s.containsKey(e.getKey()))
        return "field id " + e.getKey() + " (target column " + tPath.get(e.getKey()) + ") is not in the source" + byName(sPath, tPath.get(e.getKey()));
    return null;
  }

  private static String byName(Map<Integer, String> other, String name) {
    for (var e : other.entrySet()) if (e.getValue().equals(name)) return " (it has " + name + " as field id " + e.getKey() + ")";
    return "";
  }

  private static Map<Integer, Types.NestedField> index(org.apache.iceberg.types.Type type, String prefix, Map<Integer, Types.NestedField> out) {
    if (type.isNestedType()) for (Types.NestedField f : type.asNestedType().fields()) {
      out.put(f.fieldId(), f);
      index(f.type(), prefix, out);
    }
    return out;
  }

  private static Map<Integer, String> paths(org.apache.iceberg.types.Type type, String prefix, Map<Integer, String> out) {
    if (type.isNestedType()) for (Types.NestedField f : type.asNestedType().fields()) {
      String p = prefix.isEmpty() ? f.name() : prefix + "." + f.name();
      out.put(f.fieldId(), p);
      paths(f.type(), p, out);
    }
    return out;
  }

  /** Why files of `source` cannot be committed under `target` (same transforms of the same field ids, in order), or null. */
  static String specDifference(PartitionSpec source, PartitionSpec target) {
    List<String> s = describe(source);
    List<String> t = describe(target);
    return s.equals(t) ? null : "the source's files are partitioned by " + show(s) + ", the target by " + show(t);
  }

  private static List<String> describe(PartitionSpec spec) {
    List<String> out = new ArrayList<>();
    for (PartitionField p : spec.fields())
      if (!p.transform().isVoid()) out.add(p.transform() + "(" + spec.schema().findColumnName(p.sourceId()) + " #" + p.sourceId() + ")");
    return out;
  }

  private static String show(List<String> fields) {
    return fields.isEmpty() ? "nothing (unpartitioned)" : "[" + String.join(", ", fields) + "]";
  }

  private static Metrics metrics(org.apache.iceberg.ContentFile<?> f) {
    return new Metrics(f.recordCount(), f.columnSizes(), f.valueCounts(), f.nullValueCounts(), f.nanValueCounts(), f.lowerBounds(), f.upperBounds());
  }

  /** The same file, described under the target's spec: the path, partition tuple and metrics as the source recorded them. */
  private static DataFile dataFile(DataFile f, PartitionSpec spec) {
    DataFiles.Builder b = DataFiles.builder(spec)
        .withPath(f.location())
        .withFormat(f.format())
        .withFileSizeInBytes(f.fileSizeInBytes())
        .withMetrics(metrics(f))
        .withSplitOffsets(f.splitOffsets())
        .withEncryptionKeyMetadata(f.keyMetadata());
    if (spec.isPartitioned()) b.withPartition(f.partition());
    return b.build();
  }

  private static DeleteFile positionDeletes(DeleteFile d, PartitionSpec spec) {
    FileMetadata.Builder b = FileMetadata.deleteFileBuilder(spec)
        .ofPositionDeletes()
        .withPath(d.location())
        .withFormat(d.format())
        .withFileSizeInBytes(d.fileSizeInBytes())
        .withMetrics(metrics(d))
        .withSplitOffsets(d.splitOffsets())
        .withEncryptionKeyMetadata(d.keyMetadata());
    if (d.referencedDataFile() != null) b.withReferencedDataFile(d.referencedDataFile());
    if (spec.isPartitioned()) b.withPartition(d.partition());
    return b.build();
  }

  private static void check(String location, List<String> roots, Findings f) {
    if (!Roots.inside(location, roots)) f.outsideRoots++;
  }
}
