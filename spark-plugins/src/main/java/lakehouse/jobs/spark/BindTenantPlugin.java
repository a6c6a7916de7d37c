package lakehouse.jobs.spark;

import java.util.List;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.connect.planner.SparkConnectPlanner;
import org.apache.spark.sql.connect.plugin.CommandPlugin;
import org.sparkproject.connect.protobuf.Any;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A command (`spark.connect.extensions.command.classes`): lakehouse.jobs.BindTenant binds the
 * session to the tenant the runner runs for, before any step. From then on every plan analysed in
 * the session is judged by the tenant boundary (TenantBoundary), its operations are watched
 * (Watchdog) and run in the tenant's scheduler pool (SchedulerPools). A second binding with other
 * contents is refused: a session serves one tenant.
 */
public final class BindTenantPlugin implements CommandPlugin {
  @Override
  public boolean process(byte[] command, SparkConnectPlanner planner) {
    Any any = PluginMessages.any(command);
    if (any == null || !PluginMessages.BIND_TENANT.equals(any.getTypeUrl())) return false;
    TenantBinding binding = PluginMessages.bindTenant(any.getValue());
    // Fail closed: a server whose sessions do not run the boundary must not accept the binding.
    boolean judged = Scala.list(planner.session().sessionState().analyzer().extendedCheckRules()).stream().anyMatch(r -> r instanceof TenantBoundary);
    if (!judged)
      throw TenantPolicyException.refused(
          "the server does not judge plans against the tenant (add lakehouse.jobs.spark.TenantPolicyExtensions to spark.sql.extensions)", List.of());
    Bindings.bind(planner.sessionHolder().sessionId(), planner.session(), binding);
    neverBroadcastGenerated(planner.session());
    SchedulerPools.assign(planner.session(), binding);
    Watchdog.ensureStarted(planner.session().sparkContext());
    return true;
  }

  /** The session's last optimizer rule (after subqueries became joins): GeneratedSides. */
  private static void neverBroadcastGenerated(org.apache.spark.sql.classic.SparkSession session) {
    var experimental = session.experimental();
    List<Rule<LogicalPlan>> rules = Scala.list(experimental.extraOptimizations());
    if (rules.stream().anyMatch(r -> r instanceof GeneratedSides)) return;
    rules.add(new GeneratedSides());
    experimental.extraOptimizations_$eq(CollectionConverters.asScala(rules).toSeq());
  }
}
