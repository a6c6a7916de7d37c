package lakehouse.jobs.spark;

import org.apache.spark.sql.connect.planner.SparkConnectPlanner;
import org.apache.spark.sql.connect.plugin.CommandPlugin;
import org.sparkproject.connect.protobuf.Any;

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
          "the server does not judge plans against the tenant (add lakehouse.jobs.spark.TenantPolicyExtensions to spark.sql.extensions)", java.util.List.of());
    Bindings.bind(planner.sessionHolder().sessionId(), planner.session(), binding);
    SchedulerPools.assign(planner.session(), binding);
    Watchdog.ensureStarted(planner.session().sparkContext());
    return true;
  }
}
