package lakehouse.jobs.spark;

import java.util.Collection;
import java.util.List;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.classic.SparkSession;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The server's settings of the tenant policy: static Spark conf of the server (spark-defaults,
 * `--conf`), which no session can change, read once per use.
 *
 *   spark.lakehouse.policy.requireBinding  true: a plan of a session that is not bound to a tenant
 *                                          is refused (a shared server whose every client is the
 *                                          runner); false (default, the local stack: the tests'
 *                                          readers use unbound sessions)
 *   spark.lakehouse.policy.mode            enforce (default), or report: refusals are logged and the
 *                                          plan runs (to review what a Spark upgrade's plans contain)
 */
final class PolicySettings {
  static final String REQUIRE_BINDING = "spark.lakehouse.policy.requireBinding";
  static final String MODE = "spark.lakehouse.policy.mode";
  private static final Logger LOG = LoggerFactory.getLogger("lakehouse.jobs.TenantPolicy");

  private PolicySettings() {}

  private static SparkConf conf(SparkSession session) {
    return session.sparkContext().conf();
  }

  static boolean requireBinding(SparkSession session) {
    return conf(session).getBoolean(REQUIRE_BINDING, false);
  }

  static boolean reportOnly(SparkSession session) {
    return conf(session).get(MODE, "enforce").equals("report");
  }

  /** Refuse (or, in report mode, log) the problems found; nothing to do without one. */
  static void verdict(SparkSession session, TenantBinding binding, Collection<String> problems, List<String> configPaths, String judge) {
    verdict(session, binding, problems, configPaths, judge, List.of(), null);
  }

  /** In report mode the server's log also gets the details (locations, the plan's classes): it is the platform's, not the tenant's. */
  static void verdict(SparkSession session, TenantBinding binding, Collection<String> problems, List<String> configPaths, String judge,
      List<String> details, org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan) {
    if (problems.isEmpty()) return;
    if (reportOnly(session)) {
      for (String p : problems) LOG.warn("report-only: {} would refuse a plan of tenant {}: {}", judge, binding.tenant, p);
      for (String d : details) LOG.warn("report-only: detail: {}", d);
      if (plan != null) LOG.warn("report-only: plan: {}", plan.treeString().replace('\n', '|'));
      return;
    }
    throw TenantPolicyException.refused(String.join("; ", problems), configPaths);
  }
}
