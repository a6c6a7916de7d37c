package lakehouse.jobs.spark;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;

/**
 * The plan node classes the tenant boundary knows, each with its role; every other class is
 * refused in a bound session. Found by running every template's integration tests against the
 * boundary (docs/security-policy.md lists what each group is for). Classes are named in full: a
 * tenant cannot define a class, and a Spark upgrade that renames one fails closed.
 */
final class PlanClasses {
  enum Role {
    /** Rows in, rows out: its children are judged with the same access. */
    TRANSFORM,
    /** A view: judged by its expansion, which is its child. */
    VIEW,
    /** Reads nothing outside the plan (literal rows, a range, a CTE reference, rows the server computed). */
    LEAF,
    /** Reads (or, as a write target, is) a table, a namespace or files: judged by identity. */
    RELATION,
    /** Describes or lists what it names, which must be readable. */
    READ_COMMAND,
    /** Writes, creates, alters or drops what it names; its query is read. */
    WRITE_COMMAND,
    /** A catalog procedure (CALL): an allowed procedure on one of the tenant's tables. */
    CALL,
    /** A command's result wrapped as rows: its command is judged again. */
    COMMAND_RESULT
  }

  private static final String L = "org.apache.spark.sql.catalyst.plans.logical.";
  private static final String A = "org.apache.spark.sql.catalyst.analysis.";
  private static final String X = "org.apache.spark.sql.execution.";
  private static final String D = "org.apache.spark.sql.delta.";

  private static final Map<String, Role> ROLES = new HashMap<>();

  private static void put(Role role, String prefix, String... names) {
    for (String n : names) ROLES.put(prefix + n, role);
  }

  static {
    put(Role.TRANSFORM, L,
        "Project", "Filter", "Aggregate", "Window", "Join", "Sort", "GlobalLimit", "LocalLimit", "Offset", "Tail", "Deduplicate",
        "DeduplicateWithinWatermark", "Distinct", "Union", "Intersect", "Except", "Expand", "Generate", "SubqueryAlias", "WithCTE",
        "CTERelationDef", "Repartition", "RepartitionByExpression", "RebalancePartitions", "LateralJoin", "Sample", "SerializeFromObject",
        "DeserializeToObject", "MapElements", "MapPartitions", "TypedFilter", "AppendColumns", "AppendColumnsWithObject", "MapGroups",
        "CollectMetrics", "ResolvedHint", "EventTimeWatermark", "WindowGroupLimit", "MergeRows");
    // Pipe syntax's marker node (FROM t |> WHERE …), which analysis leaves in the plan.
    put(Role.TRANSFORM, "org.apache.spark.sql.catalyst.expressions.", "PipeOperator");
    put(Role.VIEW, L, "View");
    put(Role.LEAF, L, "LocalRelation", "OneRowRelation", "Range", "EmptyRelation", "CTERelationRef");
    put(Role.LEAF, X, "LogicalRDD", "ExternalRDD");
    put(Role.RELATION, X + "datasources.", "LogicalRelation");
    // A micro-batch's read of a streaming source: judged by the relation it scans.
    put(Role.RELATION, X + "datasources.v2.", "DataSourceV2Relation", "StreamingDataSourceV2ScanRelation");
    put(Role.RELATION, "org.apache.spark.sql.catalyst.streaming.", "StreamingRelationV2");
    put(Role.RELATION, A, "ResolvedTable", "ResolvedIdentifier", "ResolvedNamespace");
    put(Role.READ_COMMAND, L, "DescribeRelation", "ShowTables", "DescribeNamespace", "ShowTableProperties");
    put(Role.READ_COMMAND, X + "command.", "DescribeTableCommand", "ShowTablesCommand");
    put(Role.READ_COMMAND, D + "commands.", "DescribeDeltaHistoryCommand", "DescribeDeltaDetailCommand");
    put(Role.WRITE_COMMAND, L,
        "AppendData", "OverwriteByExpression", "OverwritePartitionsDynamic", "ReplaceData", "WriteDelta", "MergeIntoTable",
        "DeleteFromTable", "UpdateTable", "CreateTable", "CreateTableAsSelect", "ReplaceTable", "ReplaceTableAsSelect", "DropTable",
        "CreateNamespace", "AddColumns", "AlterColumns", "ReplaceColumns", "DropColumns", "RenameColumn", "SetTableProperties",
        "UnsetTableProperties");
    put(Role.WRITE_COMMAND, X + "datasources.", "InsertIntoHadoopFsRelationCommand", "SaveIntoDataSourceCommand");
    put(Role.WRITE_COMMAND, X + "command.", "CreateDataSourceTableCommand", "CreateDataSourceTableAsSelectCommand", "CreateDatabaseCommand");
    // A streaming query's sink, when it starts and in every micro-batch (a session derived from the bound one).
    put(Role.WRITE_COMMAND, "org.apache.spark.sql.catalyst.streaming.", "WriteToStream", "WriteToStreamStatement");
    put(Role.WRITE_COMMAND, X + "streaming.sources.", "WriteToMicroBatchDataSource", "WriteToMicroBatchDataSourceV1");
    put(Role.WRITE_COMMAND, D + "commands.",
        "MergeIntoCommand", "WriteIntoDelta", "DeleteCommand", "UpdateCommand", "OptimizeTableCommand", "VacuumTableCommand",
        "CreateDeltaTableCommand", "AlterTableAddColumnsDeltaCommand", "AlterTableSetPropertiesDeltaCommand", "RestoreTableCommand");
    // Delta 4.4's VACUUM as parsed (its `child` is the table it deletes files of: a write).
    put(Role.WRITE_COMMAND, "io.delta.tables.execution.", "VacuumTableCommand");
    put(Role.CALL, L, "Call");
    put(Role.COMMAND_RESULT, L, "CommandResult");
  }

  static Role role(String className) {
    return ROLES.get(className);
  }

  /** Commands whose `child` is the table they change, not a query they read. */
  static final Set<String> TARGET_CHILD = Set.of(
      "io.delta.tables.execution.VacuumTableCommand", "org.apache.spark.sql.delta.commands.VacuumTableCommand",
      "org.apache.spark.sql.delta.commands.OptimizeTableCommand");

  /** RESTORE TABLE (lakehouse-jobs rollback): its `sourceTable` is the table it changes, not a query it reads. */
  static final Set<String> TARGET_SOURCE_TABLE = Set.of("org.apache.spark.sql.delta.commands.RestoreTableCommand");

  /** Fields of a command that hold a query it reads, whatever else it writes. */
  static final Set<String> QUERY_FIELDS = Set.of("query", "child", "source", "sourceTable", "sourcePlan", "data", "plan", "analyzedQuery", "inputQuery");

  /**
   * The maintenance procedures table-maintenance calls (`system.<name>` of an Iceberg catalog), and
   * rollback_to_snapshot (lakehouse-jobs rollback), which only moves a table back to an ancestor.
   */
  static final Set<String> PROCEDURES = Set.of(
      "system.expire_snapshots", "system.remove_orphan_files", "system.rewrite_data_files", "system.rewrite_manifests",
      "system.rewrite_position_delete_files", "system.rollback_to_snapshot");

  /** Expressions no plan of a bound session may hold, the templates' and Delta's and Iceberg's included. */
  static final Set<String> NEVER_IN_BOUND_SESSION = Set.of(
      "org.apache.spark.sql.catalyst.expressions.CallMethodViaReflection", "org.apache.spark.sql.catalyst.expressions.TryReflect");

  private PlanClasses() {}
}
