package lakehouse.jobs.spark;

import org.apache.spark.sql.catalyst.expressions.CurrentRow$;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.RoundBase;
import org.apache.spark.sql.catalyst.expressions.RowFrame$;
import org.apache.spark.sql.catalyst.expressions.SpecifiedWindowFrame;
import org.apache.spark.sql.catalyst.expressions.UnboundedFollowing$;
import org.apache.spark.sql.catalyst.expressions.UnboundedPreceding$;
import org.apache.spark.sql.catalyst.expressions.aggregate.HyperLogLogPlusPlus;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Range;

/**
 * The arguments of allowed functions that set how much work or state one value, group or frame
 * costs, whatever the data: what SizeBounds is for the size of values, this is for those costs.
 * Every class of the allow-list (LogicClasses) was reviewed for such an argument; these are the
 * ones that have one (docs/security-policy.md, "Bounded allocation"):
 *
 * - approx_count_distinct's relative error sets its sketch's precision p: 2^p registers held in
 *   fixed-width fields of every group's aggregation buffer, and code generated for each field.
 *   At 0.0002 (p = 25, 3.3 million fields) one query held the server's driver in garbage
 *   collection until its executor exited. At least 0.01 (p = 14, 1,639 fields; Spark's default is
 *   0.05).
 * - round's, bround's, ceil's and floor's scale: rounding a double or a decimal to s digits
 *   computes 10^s in Java's BigDecimal, superlinearly in s (round(1.5D, 10000000) took 47 s of one
 *   core for one value, not interruptible). A double has at most 17 significant digits and
 *   exponents of ±308, a decimal 38 digits: beyond ±400 digits rounding changes nothing.
 * - a sliding window frame (both ends bounded) keeps the rows between its ends in memory that no
 *   memory manager counts (Spark's SlidingWindowFunctionFrame): a ROWS frame's offsets are
 *   literals whose width is at most limits.collection-elements. A RANGE frame's rows are the
 *   data's, like the size of a value the data holds.
 * - range(start, end, step, partitions)'s partitions are tasks the driver creates and schedules:
 *   50 million of them held the local server's driver for 40 s and failed with an error boxed
 *   from its scheduler. At most 1,000 (a JDBC source may ask for 256).
 */
final class WorkBounds {
  static final double MIN_RELATIVE_ERROR = 0.01;
  static final int MAX_ROUND_SCALE = 400;
  static final int MAX_RANGE_PARTITIONS = 1_000;

  private WorkBounds() {}

  /** What makes `e` cost more than its class may, or null. */
  static String problem(Expression e, TenantBinding.Limits limits) {
    if (e instanceof HyperLogLogPlusPlus h && !(h.relativeSD() >= MIN_RELATIVE_ERROR))
      return "approx_count_distinct's relative error is " + h.relativeSD() + ", less than " + MIN_RELATIVE_ERROR
          + ": its sketch's state doubles with every halving of the error, in every group, and holds the shared server's memory";
    if (e instanceof RoundBase r) {
      Object scale = SizeBounds.constant(r.right());
      if (!(scale instanceof Number n) || Math.abs(n.longValue()) > MAX_ROUND_SCALE)
        return e.prettyName() + "'s scale must be a literal between -" + MAX_ROUND_SCALE + " and " + MAX_ROUND_SCALE
            + " (it is " + scale + "): the work of rounding grows with the scale's digits, and beyond them nothing changes";
    }
    if (e instanceof SpecifiedWindowFrame f && !(f.lower() instanceof UnboundedPreceding$) && !(f.upper() instanceof UnboundedFollowing$)
        && f.frameType() == RowFrame$.MODULE$) {
      Long lower = offset(f.lower());
      Long upper = offset(f.upper());
      if (lower == null || upper == null) return "a ROWS frame's offsets must be literals (or CURRENT ROW, UNBOUNDED)";
      long width = PlanSize.add(PlanSize.add(upper, -lower), 1);
      if (width > limits.collectionElements())
        return "a ROWS frame of " + width + " rows is more than the platform allows (limits.collection-elements " + limits.collectionElements()
            + "): a frame bounded at both ends holds its rows in the shared server's memory (leave one end UNBOUNDED)";
    }
    return null;
  }

  /** What makes plan node `p` cost more than its class may, or null. */
  static String problem(LogicalPlan p) {
    if (p instanceof Range r && r.numSlices().isDefined() && ((Integer) r.numSlices().get()) > MAX_RANGE_PARTITIONS)
      return "range(…) asks for " + r.numSlices().get() + " partitions, more than " + MAX_RANGE_PARTITIONS
          + ": each is a task the shared server's driver creates and schedules";
    return null;
  }

  private static Long offset(Expression bound) {
    if (bound == CurrentRow$.MODULE$) return 0L;
    Object v = SizeBounds.constant(bound);
    if (v instanceof Number n && !(v instanceof Double) && !(v instanceof Float)) return n.longValue();
    return null;
  }
}
