package lakehouse.jobs.spark;

import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.Pool;
import org.apache.spark.scheduler.SchedulingMode;
import org.apache.spark.scheduler.TaskScheduler;
import org.apache.spark.sql.classic.SparkSession;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Each tenant's work runs in a scheduler pool of its own: `tenant:<id>`, set when the runner binds
 * a session (BindTenantPlugin), never by the tenant's config or SQL.
 *
 * Why per tenant and not per run: on a FAIR server (`spark.scheduler.mode=FAIR`) the pools share the
 * cores, so a tenant that starts ten runs at once gets one share, not ten, and the number of pools
 * stays the number of tenants (Spark never removes a pool, and sorts every pool at every task offer).
 * Inside its pool a tenant's runs share FAIR as well (Spark would create an unknown pool FIFO inside):
 * a small run of a tenant is not starved behind the same tenant's large one either. A platform gives
 * a tenant another weight or a minimum share in the allocation file
 * (`spark.scheduler.allocation.file`, a `<pool name="tenant:<id>">`), which this leaves as it is.
 *
 * How it reaches the jobs: the pool is a setting of the bound session, and Spark copies the
 * settings of a session whose names start with `spark` into the local properties of every SQL
 * execution's thread (SQLExecution.withSQLConfPropagated): every job of a query, a command, a
 * MERGE, a checkpoint, Delta's and Iceberg's own queries, and of the sessions Spark derives from a
 * bound one (a stream's micro-batches, a procedure's rewrite), which copy its settings. The
 * watchdog (Watchdog) logs the pool of every job of a bound session's operations and warns of a
 * job outside its tenant's pool.
 */
final class SchedulerPools {
  /** SparkContext.SPARK_SCHEDULER_POOL: the local property TaskSetManagers are placed by. */
  static final String POOL = "spark.scheduler.pool";
  private static final Logger LOG = LoggerFactory.getLogger("lakehouse.jobs.Scheduling");

  private SchedulerPools() {}

  /** The pool of a binding's operations. */
  static String of(TenantBinding binding) {
    return "tenant:" + binding.tenant;
  }

  /** Put a bound session's work into its tenant's pool (creating the pool on a FAIR server). */
  static void assign(SparkSession session, TenantBinding binding) {
    String pool = of(binding);
    // Not RuntimeConfig.set: that refuses keys it does not know as SQL settings in some versions.
    session.sessionState().conf().setConfString(POOL, pool);
    ensure(session.sparkContext(), pool);
  }

  /**
   * Create the pool, FAIR inside, unless the allocation file (or an earlier binding) did. Spark
   * creates a pool it meets in a job on its own, but FIFO inside: one run of a tenant would then wait
   * for every task of the tenant's earlier runs.
   */
  static void ensure(SparkContext sc, String name) {
    if (!SchedulingMode.FAIR().equals(sc.getSchedulingMode())) return;
    TaskScheduler scheduler = sc.taskScheduler();
    Pool root = scheduler.rootPool();
    // The scheduler adds pools while holding its own lock (TaskSchedulerImpl.submitTasks): so do we.
    synchronized (scheduler) {
      if (root.getSchedulableByName(name) != null) return;
      root.addSchedulable(new Pool(name, SchedulingMode.FAIR(), 0, 1));
    }
    LOG.info("created the scheduler pool {} (FAIR inside, weight 1, minimum share 0)", name);
  }
}
