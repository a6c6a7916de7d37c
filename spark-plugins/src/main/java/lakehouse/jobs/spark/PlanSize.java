package lakehouse.jobs.spark;

import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.spark.sql.catalyst.analysis.UnresolvedRelation;
import org.apache.spark.sql.catalyst.expressions.Cube;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GroupingSets;
import org.apache.spark.sql.catalyst.expressions.Rollup;
import org.apache.spark.sql.catalyst.expressions.SubqueryExpression;
import org.apache.spark.sql.catalyst.plans.logical.Aggregate;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.UnresolvedWith;

/**
 * How many plan and expression nodes a parsed plan becomes once Spark expands it, counted before
 * analysis. Analysis and optimization run on the server's driver, in the memory every session
 * shares, and some of what they do multiplies a small text: Spark's analysis check inlines every
 * CTE at each of its references (thirty CTEs that each read the one before twice are 2^30 nodes),
 * `GROUP BY CUBE(c1, …, cN)` becomes 2^N grouping sets, and a simple `CASE x WHEN …` repeats `x`
 * in each branch (nested, it multiplies). A few kilobytes of SQL held a server in garbage collection
 * until it died. So the expanded size is bounded (limits.plan-nodes) before analysis starts.
 *
 * Each node is sized once (by identity), so a tree whose parts are shared, however large it
 * expands, is measured in time linear in its parsed size; a CTE reference counts as the
 * definition it names (in scope, as Spark resolves names), a grouping analytic as its sets times
 * the aggregate's width. Sums saturate at Long.MAX_VALUE.
 */
final class PlanSize {
  private final Map<Object, Long> memo = new IdentityHashMap<>();

  /** The expanded size of a parsed plan. */
  long of(LogicalPlan p) {
    return plan(p, Map.of());
  }

  private long plan(LogicalPlan p, Map<String, Long> ctes) {
    Long known = memo.get(p);
    if (known != null) return known;
    long n;
    if (p instanceof UnresolvedWith w) {
      Map<String, Long> scope = new HashMap<>(ctes);
      n = 1;
      for (var def : Scala.list(w.cteRelations())) {
        String name = def._1().toLowerCase(Locale.ROOT);
        // A recursive reference to itself counts once (recursion is refused after analysis).
        if (w.allowRecursion()) scope.put(name, 1L);
        long size = plan(def._2(), scope);
        scope.put(name, size);
        n = add(n, size);
      }
      n = add(n, plan(w.child(), scope));
    } else if (p instanceof UnresolvedRelation r && r.multipartIdentifier().size() == 1
        && ctes.containsKey(r.multipartIdentifier().head().toLowerCase(Locale.ROOT))) {
      n = ctes.get(r.multipartIdentifier().head().toLowerCase(Locale.ROOT));
    } else {
      n = 1;
      long width = 0;
      for (Expression e : Scala.list(p.expressions())) {
        long s = expression(e, ctes);
        width = add(width, s);
        n = add(n, s);
      }
      if (p instanceof Aggregate a) n = add(n, mul(groupingSets(Scala.list(a.groupingExpressions())) - 1, width));
      for (LogicalPlan c : Scala.list(p.children())) n = add(n, plan(c, ctes));
    }
    memo.put(p, n);
    return n;
  }

  private long expression(Expression e, Map<String, Long> ctes) {
    Long known = memo.get(e);
    if (known != null) return known;
    long n = 1;
    if (e instanceof SubqueryExpression s) n = add(n, plan(s.plan(), ctes));
    for (Expression c : Scala.list(e.children())) n = add(n, expression(c, ctes));
    memo.put(e, n);
    return n;
  }

  /** How many grouping sets a GROUP BY expands into: CUBE of n is 2^n, ROLLUP n + 1, GROUPING SETS as listed; several multiply. */
  private static long groupingSets(List<Expression> grouping) {
    long sets = 1;
    for (Expression g : grouping) {
      long k;
      if (g instanceof Cube c) {
        int n = c.groupingSetIndexes().size();
        k = n >= 62 ? Long.MAX_VALUE : 1L << n;
      } else if (g instanceof Rollup r) k = r.groupingSetIndexes().size() + 1L;
      else if (g instanceof GroupingSets s) k = Math.max(1, s.groupingSetIndexes().size());
      else k = 1;
      sets = mul(sets, k);
    }
    return sets;
  }

  static long add(long a, long b) {
    long r = a + b;
    return ((a ^ r) & (b ^ r)) < 0 ? Long.MAX_VALUE : r;
  }

  static long mul(long a, long b) {
    if (a <= 0 || b <= 0) return 0;
    long hi = Math.multiplyHigh(a, b);
    long lo = a * b;
    return hi == 0 && lo >= 0 ? lo : Long.MAX_VALUE;
  }
}
