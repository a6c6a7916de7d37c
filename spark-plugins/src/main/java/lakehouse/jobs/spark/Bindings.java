package lakehouse.jobs.spark;

import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.WeakHashMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.classic.SparkSession;

/**
 * The tenant bindings of the server's Spark Connect sessions, in the plugin's own state: tenant
 * SQL has no way to read or change it (it is not SQL conf, and no function exposes it).
 *
 * A plan is judged in the binding of its session, found by the session object; a session the
 * server derives from a bound one (a streaming query's micro-batches, a maintenance procedure's
 * rewrite) is found through the Connect operation that runs it: Spark Connect tags every job of
 * an operation with its session id (a local property of the operation's threads, which tenant SQL
 * cannot set).
 */
final class Bindings {
  private static final Map<SparkSession, TenantBinding> BY_SESSION = Collections.synchronizedMap(new WeakHashMap<>());
  private static final Map<String, TenantBinding> BY_CONNECT_SESSION = new ConcurrentHashMap<>();
  private static final String OPERATION_TAG = "SparkConnect_OperationTag_User_";
  /** SparkContext.SPARK_JOB_TAGS: the local property holding a thread's job tags. */
  static final String JOB_TAGS = "spark.job.tags";

  private Bindings() {}

  /** Bind a Connect session; the same binding again is a no-op, another one is refused. */
  static synchronized void bind(String connectSessionId, SparkSession session, TenantBinding binding) {
    TenantBinding existing = BY_CONNECT_SESSION.get(connectSessionId);
    if (existing == null) existing = BY_SESSION.get(session);
    if (existing != null) {
      if (existing.sameAs(binding)) return;
      throw TenantPolicyException.refused("this Spark Connect session is already bound to a tenant; it cannot be bound again", List.of());
    }
    BY_CONNECT_SESSION.put(connectSessionId, binding);
    BY_SESSION.put(session, binding);
  }

  /** The binding plans of `session` are judged in, or null for an unbound session. */
  static TenantBinding of(SparkSession session) {
    TenantBinding b = BY_SESSION.get(session);
    return b != null ? b : ofOperationThread(session.sparkContext());
  }

  /** The binding of the Connect session whose operation runs on this thread, if any. */
  static TenantBinding ofOperationThread(SparkContext sc) {
    String tags = sc.getLocalProperty(JOB_TAGS);
    if (tags == null || tags.isEmpty()) return null;
    for (String tag : tags.split(",")) {
      String id = connectSessionOf(tag);
      TenantBinding b = id == null ? null : BY_CONNECT_SESSION.get(id);
      if (b != null) return b;
    }
    return null;
  }

  /** `SparkConnect_OperationTag_User_<user>_Session_<session>_Operation_<operation>` → the session id. */
  static String connectSessionOf(String jobTag) {
    if (!jobTag.startsWith(OPERATION_TAG)) return null;
    int op = jobTag.lastIndexOf("_Operation_");
    int session = op < 0 ? -1 : jobTag.lastIndexOf("_Session_", op);
    return session < 0 ? null : jobTag.substring(session + "_Session_".length(), op);
  }

  static TenantBinding ofConnectSession(String connectSessionId) {
    return connectSessionId == null ? null : BY_CONNECT_SESSION.get(connectSessionId);
  }

  /** The Connect session ended (the watchdog hears of it): its binding goes. */
  static void forget(String connectSessionId) {
    TenantBinding b = BY_CONNECT_SESSION.remove(connectSessionId);
    if (b != null) BY_SESSION.values().removeIf(v -> v == b);
  }
}
