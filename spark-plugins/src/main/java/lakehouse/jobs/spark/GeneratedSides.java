package lakehouse.jobs.spark;

import java.util.IdentityHashMap;
import java.util.Map;
import org.apache.spark.sql.catalyst.plans.logical.Generate;
import org.apache.spark.sql.catalyst.plans.logical.HintInfo;
import org.apache.spark.sql.catalyst.plans.logical.Join;
import org.apache.spark.sql.catalyst.plans.logical.JoinHint;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.NO_BROADCAST_AND_REPLICATION$;
import org.apache.spark.sql.catalyst.rules.Rule;
import scala.Option;
import scala.runtime.AbstractPartialFunction;

/**
 * An optimizer rule of every session bound to a tenant (BindTenantPlugin installs it, last, after
 * Spark has turned subqueries into joins): a join side that holds a generator is never broadcast.
 *
 * Spark estimates a generator's output (explode, inline, stack) as its input's size: an explode of
 * a literal sequence is "one row". A gold transform that exploded literal sequences into ten million
 * rows of 450 characters and joined them was broadcast whole, read into the driver's heap, and
 * ended the local server for every tenant. So such a side carries Spark's hint not to broadcast or
 * replicate it: an equi-join shuffles it, an inner join without equality becomes a cartesian
 * product, and an outer one broadcasts its other side. Sides estimated from what is stored keep
 * Spark's own choice.
 */
final class GeneratedSides extends Rule<LogicalPlan> {
  private static final Option<HintInfo> NO_BROADCAST = Option.apply(new HintInfo(Option.apply(NO_BROADCAST_AND_REPLICATION$.MODULE$)));

  @Override
  public LogicalPlan apply(LogicalPlan plan) {
    Map<LogicalPlan, Boolean> generated = new IdentityHashMap<>();
    return plan.transformUpWithSubqueries(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
      @Override
      public boolean isDefinedAt(LogicalPlan p) {
        return p instanceof Join;
      }

      @Override
      public LogicalPlan apply(LogicalPlan p) {
        Join j = (Join) p;
        boolean left = holdsGenerator(j.left(), generated);
        boolean right = holdsGenerator(j.right(), generated);
        if (!left && !right) return j;
        JoinHint hint = j.hint();
        JoinHint marked = new JoinHint(left ? NO_BROADCAST : hint.leftHint(), right ? NO_BROADCAST : hint.rightHint());
        if (marked.equals(hint)) return j;
        return new Join(j.left(), j.right(), j.joinType(), j.condition(), marked);
      }
    });
  }

  private static boolean holdsGenerator(LogicalPlan p, Map<LogicalPlan, Boolean> known) {
    Boolean k = known.get(p);
    if (k != null) return k;
    boolean found = p instanceof Generate;
    for (LogicalPlan c : Scala.list(p.children())) found |= holdsGenerator(c, known);
    known.put(p, found);
    return found;
  }
}
