package lakehouse.jobs.spark;

import org.apache.spark.sql.connect.planner.SparkConnectPlanner;
import org.apache.spark.sql.connect.plugin.CommandPlugin;

/**
 * A command (`spark.connect.extensions.command.classes`): commit the zero-copy append. It checks
 * everything again on the state it commits; a refusal here means the tables changed since the
 * runner's check, and is a retryable commit failure (the rerun's check says why).
 */
public final class ZeroCopyAppendPlugin implements CommandPlugin {
  @Override
  public boolean process(byte[] command, SparkConnectPlanner planner) {
    ZeroCopyRequest req = ZeroCopyRequest.parse(command);
    if (req == null || !req.isCommit()) return false;
    ZeroCopyAppend.commit(planner.session(), req);
    return true;
  }
}
