package lakehouse.jobs.spark;

import java.util.List;
import java.util.Optional;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.connect.planner.SparkConnectPlanner;
import org.apache.spark.sql.connect.plugin.RelationPlugin;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * A relation (`spark.connect.extensions.relation.classes`): the zero-copy append's checks as one
 * row of facts. It only reads table metadata (it may be analysed more than once); the runner's
 * template decides what each fact means.
 */
public final class ZeroCopyCheckPlugin implements RelationPlugin {
  static final StructType SCHEMA = new StructType()
      .add("source_exists", DataTypes.BooleanType, false)
      .add("target_exists", DataTypes.BooleanType, false)
      .add("source_uuid", DataTypes.StringType)
      .add("source_location", DataTypes.StringType)
      .add("target_location", DataTypes.StringType)
      .add("source_snapshot_id", DataTypes.StringType)
      .add("target_snapshot_id", DataTypes.StringType)
      .add("data_files", DataTypes.LongType, false)
      .add("position_delete_files", DataTypes.LongType, false)
      .add("equality_delete_files", DataTypes.LongType, false)
      .add("records", DataTypes.LongType, false)
      .add("already_appended", DataTypes.BooleanType, false)
      .add("schema_problem", DataTypes.StringType)
      .add("last_column_id_problem", DataTypes.StringType)
      .add("spec_problem", DataTypes.StringType)
      .add("format_problem", DataTypes.StringType)
      .add("source_changed_problem", DataTypes.StringType)
      .add("outside_roots", DataTypes.LongType, false);

  @Override
  public Optional<LogicalPlan> transform(byte[] relation, SparkConnectPlanner planner) {
    ZeroCopyRequest req = ZeroCopyRequest.parse(relation);
    if (req == null || req.isCommit()) return Optional.empty();
    ZeroCopyAppend.Findings f = ZeroCopyAppend.inspect(planner.session(), req);
    Row row = RowFactory.create(
        f.sourceExists, f.targetExists, f.sourceUuid, f.sourceLocation, f.targetLocation,
        f.sourceSnapshotId == null ? null : f.sourceSnapshotId.toString(),
        f.targetSnapshotId == null ? null : f.targetSnapshotId.toString(),
        f.dataFiles, f.positionDeleteFiles, f.equalityDeleteFiles, f.records, f.alreadyAppended,
        f.schemaProblem, f.lastColumnIdProblem, f.specProblem, f.formatProblem, f.sourceChangedProblem, f.outsideRoots);
    return Optional.of(planner.session().createDataFrame(List.of(row), SCHEMA).logicalPlan());
  }
}
