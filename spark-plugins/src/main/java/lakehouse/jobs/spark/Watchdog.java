package lakehouse.jobs.spark;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.AccumulableInfo;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.scheduler.SparkListenerExecutorMetricsUpdate;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.sql.connect.service.SparkListenerConnectOperationCanceled;
import org.apache.spark.sql.connect.service.SparkListenerConnectOperationClosed;
import org.apache.spark.sql.connect.service.SparkListenerConnectOperationFailed;
import org.apache.spark.sql.connect.service.SparkListenerConnectOperationFinished;
import org.apache.spark.sql.connect.service.SparkListenerConnectOperationStarted;
import org.apache.spark.sql.connect.service.SparkListenerConnectSessionClosed;
import org.apache.spark.sql.execution.SparkPlanInfo;
import org.apache.spark.sql.execution.metric.SQLMetricInfo;
import org.apache.spark.sql.execution.ui.SparkListenerSQLAdaptiveExecutionUpdate;
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd;
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The watchdog over the operations of bound sessions (a SparkListener of the plugin, started with
 * the first binding): it cancels an operation's jobs
 *
 *  - when an operator's output rows exceed `row_growth` times the rows the operation read, and at
 *    least `row_floor` rows (a cross join exploding): LAKEHOUSE_WATCHDOG_ROWS, which the runner
 *    reports as a data error (65);
 *  - when the operation runs longer than `step_seconds`: LAKEHOUSE_WATCHDOG_TIME, a timeout (75).
 *
 * Rows are counted from the live SQL metrics ("number of output rows") and input metrics that the
 * executors' heartbeats carry (spark.executor.heartbeatInterval), and the finished tasks' values.
 * The rows read are the larger of the tasks' input records and the output rows of the plan's leaf
 * scans of a relation (a file source, a JDBC relation, a DataSource V2 batch or stream): a
 * heartbeat can carry a scan's output rows before any input records (Parquet and Iceberg readers
 * report those late), and a scan's own output must never count as growth. Generated leaves
 * (`range`, literal rows) are not scans: their rows count as produced, never as read. The scans'
 * metric ids come from the SQL executions' plan info, at their start and at each adaptive
 * re-plan, which the listener bus delivers before the jobs that run them.
 * The reason travels in Spark's SPARK_JOB_CANCELLED error, which the client receives.
 */
final class Watchdog extends SparkListener {
  static final String ROWS = "LAKEHOUSE_WATCHDOG_ROWS";
  static final String TIME = "LAKEHOUSE_WATCHDOG_TIME";
  private static final Logger LOG = LoggerFactory.getLogger("lakehouse.jobs.Watchdog");
  private static final Logger POOLS = LoggerFactory.getLogger("lakehouse.jobs.Scheduling");
  private static final String OUTPUT_ROWS = "number of output rows";
  private static final String INPUT_RECORDS = "internal.metrics.input.recordsRead";
  private static Watchdog instance;

  private final SparkContext sc;
  /** Operations of bound sessions by their job tag; jobs and stages to their operation. */
  private final Map<String, Operation> operations = new ConcurrentHashMap<>();
  private final Map<Integer, Operation> jobs = new ConcurrentHashMap<>();
  private final Map<Integer, Operation> stages = new ConcurrentHashMap<>();
  /** The "number of output rows" metric ids of the running SQL executions' leaf scans, by execution. */
  private final Map<Long, Set<Long>> scansByExecution = new ConcurrentHashMap<>();
  private final Set<Long> scans = ConcurrentHashMap.newKeySet();

  private static final class Operation {
    final String jobTag;
    final String operationId;
    final long started;
    final TenantBinding.Limits limits;
    final String tenant;
    final String pool;
    /** Per accumulator, per task: the latest value (heartbeats carry totals so far). */
    final Map<Long, Map<Long, Long>> outputRows = new ConcurrentHashMap<>();
    final Map<Long, Long> inputRecords = new ConcurrentHashMap<>();
    volatile String cancelled;

    Operation(String jobTag, String operationId, long started, TenantBinding binding) {
      this.jobTag = jobTag;
      this.operationId = operationId;
      this.started = started;
      this.limits = binding.limits;
      this.tenant = binding.tenant;
      this.pool = SchedulerPools.of(binding);
    }

    long input() {
      return inputRecords.values().stream().mapToLong(Long::longValue).sum();
    }

    /** The rows the operation's leaf scans produced so far. */
    long scanned(Set<Long> scans) {
      long sum = 0;
      for (var e : outputRows.entrySet())
        if (scans.contains(e.getKey())) sum += e.getValue().values().stream().mapToLong(Long::longValue).sum();
      return sum;
    }

    long largestOutput() {
      long max = 0;
      for (Map<Long, Long> perTask : outputRows.values()) max = Math.max(max, perTask.values().stream().mapToLong(Long::longValue).sum());
      return max;
    }
  }

  private Watchdog(SparkContext sc) {
    this.sc = sc;
  }

  static synchronized void ensureStarted(SparkContext sc) {
    if (instance != null) return;
    instance = new Watchdog(sc);
    sc.addSparkListener(instance);
    ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "lakehouse-jobs-watchdog");
      t.setDaemon(true);
      return t;
    });
    timer.scheduleWithFixedDelay(instance::checkTimes, 1, 1, TimeUnit.SECONDS);
  }

  @Override
  public void onOtherEvent(SparkListenerEvent event) {
    if (event instanceof SparkListenerConnectOperationStarted e) {
      TenantBinding b = Bindings.ofConnectSession(e.sessionId());
      if (b != null) operations.put(e.jobTag(), new Operation(e.jobTag(), e.operationId(), e.eventTime(), b));
    } else if (event instanceof SparkListenerConnectOperationFinished e) end(e.jobTag());
    else if (event instanceof SparkListenerConnectOperationFailed e) end(e.jobTag());
    else if (event instanceof SparkListenerConnectOperationCanceled e) end(e.jobTag());
    else if (event instanceof SparkListenerConnectOperationClosed e) end(e.jobTag());
    else if (event instanceof SparkListenerConnectSessionClosed e) Bindings.forget(e.sessionId());
    else if (event instanceof SparkListenerSQLExecutionStart e) scans(e.executionId(), e.sparkPlanInfo());
    else if (event instanceof SparkListenerSQLAdaptiveExecutionUpdate e) scans(e.executionId(), e.sparkPlanInfo());
    else if (event instanceof SparkListenerSQLExecutionEnd e) {
      Set<Long> ids = scansByExecution.remove(e.executionId());
      if (ids != null) scans.removeAll(ids);
    }
  }

  /** Records the output-row metric ids of a plan's leaf scans of a relation. */
  private void scans(long executionId, SparkPlanInfo plan) {
    List<Long> found = new ArrayList<>();
    leafScans(plan, found);
    if (found.isEmpty()) return;
    scansByExecution.computeIfAbsent(executionId, k -> ConcurrentHashMap.newKeySet()).addAll(found);
    scans.addAll(found);
  }

  private static void leafScans(SparkPlanInfo node, List<Long> found) {
    List<SparkPlanInfo> children = Scala.list(node.children());
    if (children.isEmpty() && isScan(node.nodeName())) {
      for (SQLMetricInfo m : Scala.list(node.metrics())) if (m.name().equals(OUTPUT_ROWS)) found.add(m.accumulatorId());
    }
    for (SparkPlanInfo c : children) leafScans(c, found);
  }

  /**
   * A leaf that reads a relation, by the node names Spark gives its scans: `Scan <format or
   * relation> <table>` (FileSourceScanExec, RowDataSourceScanExec; also RDDScanExec of a kept or
   * one-row relation, whose rows were read before or are one), `BatchScan <table>`,
   * `MicroBatchScan`, `ContinuousScan` (DataSource V2). `Range`, `LocalTableScan` and the
   * generators are not: what they produce is judged, never counted as read.
   */
  static boolean isScan(String nodeName) {
    return nodeName.startsWith("Scan ") || nodeName.startsWith("BatchScan") || nodeName.startsWith("MicroBatchScan") || nodeName.startsWith("ContinuousScan");
  }

  private void end(String jobTag) {
    Operation op = operations.remove(jobTag);
    if (op == null) return;
    jobs.values().removeIf(o -> o == op);
    stages.values().removeIf(o -> o == op);
  }

  @Override
  public void onJobStart(SparkListenerJobStart e) {
    String tags = e.properties() == null ? null : e.properties().getProperty(Bindings.JOB_TAGS);
    if (tags == null) return;
    for (String tag : tags.split(",")) {
      Operation op = operations.get(tag);
      if (op == null) continue;
      jobs.put(e.jobId(), op);
      for (Object stage : Scala.list(e.stageIds())) stages.put((Integer) stage, op);
      pool(op, e.jobId(), e.properties().getProperty(SchedulerPools.POOL));
      return;
    }
  }

  /**
   * The pool a job of a bound operation was placed in (its local properties, which the scheduler
   * reads): one line per job for the platform's log, and a warning for a job outside its tenant's
   * pool (a Spark, Delta or Iceberg path that does not carry the session's settings to its jobs).
   */
  private static void pool(Operation op, int jobId, String pool) {
    if (op.pool.equals(pool)) POOLS.info("job {} of operation {} (tenant {}) in pool {}", jobId, op.operationId, op.tenant, pool);
    else POOLS.warn("job {} of operation {} (tenant {}) in pool {}, not in its tenant's pool {}", jobId, op.operationId, op.tenant, pool == null ? "default" : pool, op.pool);
  }

  @Override
  public void onJobEnd(SparkListenerJobEnd e) {
    jobs.remove(e.jobId());
  }

  @Override
  public void onExecutorMetricsUpdate(SparkListenerExecutorMetricsUpdate e) {
    for (var update : Scala.list(e.accumUpdates())) {
      Operation op = stages.get((Integer) update._2());
      if (op != null) record(op, (Long) update._1(), Scala.list(update._4()));
    }
  }

  @Override
  public void onTaskEnd(SparkListenerTaskEnd e) {
    Operation op = stages.get(e.stageId());
    if (op != null && e.taskInfo() != null) record(op, e.taskInfo().taskId(), Scala.list(e.taskInfo().accumulables()));
  }

  private void record(Operation op, long task, Iterable<AccumulableInfo> accums) {
    for (AccumulableInfo a : accums) {
      String name = Scala.orNull(a.name());
      Object value = Scala.orNull(a.update());
      if (value == null) value = Scala.orNull(a.value());
      if (name == null || !(value instanceof Long v)) continue;
      if (name.equals(OUTPUT_ROWS)) op.outputRows.computeIfAbsent(a.id(), k -> new ConcurrentHashMap<>()).merge(task, v, Math::max);
      else if (name.equals(INPUT_RECORDS)) op.inputRecords.merge(task, v, Math::max);
    }
    long output = op.largestOutput();
    long input = Math.max(op.input(), op.scanned(scans));
    long allowed = Math.max(op.limits.rowFloor(), saturatedMultiply(op.limits.rowGrowth(), input));
    if (output > allowed)
      cancel(op, ROWS + ": an operator produced more than " + allowed + " rows from " + input
          + " rows read (the platform's limits.row-growth times the rows read, at least limits.row-floor); the operation was cancelled");
  }

  private static long saturatedMultiply(long a, long b) {
    long hi = Math.multiplyHigh(a, b);
    long lo = a * b;
    return (hi == 0 && lo >= 0) ? lo : Long.MAX_VALUE;
  }

  private void checkTimes() {
    long now = System.currentTimeMillis();
    for (Operation op : operations.values()) {
      long limit = op.limits.stepSeconds();
      if (now - op.started > limit * 1000L)
        cancel(op, TIME + ": the operation ran longer than " + limit + " s (the platform's limits.step-seconds); it was cancelled");
    }
  }

  private void cancel(Operation op, String reason) {
    if (op.cancelled != null) return;
    op.cancelled = reason;
    LOG.warn("cancelling operation {}: {}", op.operationId, reason);
    try {
      sc.cancelJobsWithTag(op.jobTag, reason);
    } catch (RuntimeException e) {
      LOG.warn("could not cancel the jobs of operation {}", op.operationId, e);
    }
  }
}
