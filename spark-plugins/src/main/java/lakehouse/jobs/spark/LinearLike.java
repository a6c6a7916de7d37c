package lakehouse.jobs.spark;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.catalyst.expressions.Add;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.EndsWith;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GreaterThan;
import org.apache.spark.sql.catalyst.expressions.GreaterThanOrEqual;
import org.apache.spark.sql.catalyst.expressions.ILike;
import org.apache.spark.sql.catalyst.expressions.If;
import org.apache.spark.sql.catalyst.expressions.IsNull;
import org.apache.spark.sql.catalyst.expressions.Length;
import org.apache.spark.sql.catalyst.expressions.LessThanOrEqual;
import org.apache.spark.sql.catalyst.expressions.Like;
import org.apache.spark.sql.catalyst.expressions.LikeAll;
import org.apache.spark.sql.catalyst.expressions.LikeAny;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.Lower;
import org.apache.spark.sql.catalyst.expressions.MultiLikeBase;
import org.apache.spark.sql.catalyst.expressions.Not;
import org.apache.spark.sql.catalyst.expressions.NotLikeAll;
import org.apache.spark.sql.catalyst.expressions.NotLikeAny;
import org.apache.spark.sql.catalyst.expressions.NullIf;
import org.apache.spark.sql.catalyst.expressions.Or;
import org.apache.spark.sql.catalyst.expressions.StartsWith;
import org.apache.spark.sql.catalyst.expressions.StringLocate;
import org.apache.spark.sql.catalyst.expressions.Substring;
import org.apache.spark.sql.catalyst.expressions.Subtract;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.unsafe.types.UTF8String;
import scala.runtime.AbstractPartialFunction;

/**
 * LIKE, ILIKE and LIKE ANY/ALL with literal patterns, rewritten into string functions that run in
 * linear time: Spark runs LIKE as a java.util.regex pattern, which backtracks (`%a%a%a…%b` takes
 * hours on one row) and ignores interrupts. The semantics are the config expressions' own, one
 * semantics for both (src/core/expression/like.ts reads the pattern, likeExpr in
 * src/spark/plan/config-expression.ts builds the same functions): `_` stands only before the first
 * `%` or after the last one, where it is a position; between two `%` it would need a regular
 * expression and is refused, as is a pattern with more than MAX_WILDCARDS `%`.
 */
final class LinearLike {
  static final int MAX_WILDCARDS = 16;

  static final class NotLinear extends RuntimeException {
    private static final long serialVersionUID = 1L;

    NotLinear(String message) {
      super(message, null, false, false);
    }
  }

  private LinearLike() {}

  /** Rewrite every LIKE of `e`; throws NotLinear for one that cannot be. */
  static Expression rewrite(Expression e) {
    return e.transformUp(new AbstractPartialFunction<Expression, Expression>() {
      @Override
      public boolean isDefinedAt(Expression x) {
        return x instanceof Like || x instanceof ILike || x instanceof MultiLikeBase;
      }

      @Override
      public Expression apply(Expression x) {
        if (x instanceof Like l) return like(l.left(), pattern(l.right()), l.escapeChar());
        if (x instanceof ILike l) return like(new Lower(l.left()), lower(pattern(l.right())), l.escapeChar());
        MultiLikeBase m = (MultiLikeBase) x;
        List<Expression> each = new ArrayList<>();
        for (UTF8String p : Scala.list(m.patterns())) {
          if (p == null) throw new NotLinear("a LIKE ANY/ALL pattern is NULL");
          each.add(like(m.child(), p.toString(), '\\'));
        }
        if (x instanceof LikeAny) return fold(each, true, false);
        if (x instanceof NotLikeAny) return fold(each, true, true);
        if (x instanceof LikeAll) return fold(each, false, false);
        if (x instanceof NotLikeAll) return fold(each, false, true);
        throw new NotLinear("an unknown LIKE form");
      }
    });
  }

  /** LIKE ANY is an OR of the matches, LIKE ALL an AND; NOT negates each match (NOT LIKE ANY: some pattern does not match). */
  private static Expression fold(List<Expression> each, boolean any, boolean negate) {
    Expression out = null;
    for (Expression x : each) {
      Expression y = negate ? new Not(x) : x;
      out = out == null ? y : any ? new Or(out, y) : new And(out, y);
    }
    return out == null ? Literal.create(!any, DataTypes.BooleanType) : out;
  }

  private static String pattern(Expression right) {
    Object v = SizeBounds.constant(right);
    if (!(v instanceof String s)) throw new NotLinear("LIKE needs a literal pattern (a pattern computed from the data would need a regular expression)");
    return s;
  }

  private static String lower(String pattern) {
    Object v = new Lower(Literal.create(pattern, DataTypes.StringType)).eval(null);
    return v.toString();
  }

  /** A `_` of a pattern: any one character. */
  private static final int ANY_ONE = -1;

  /** The pattern split at its `%`s into segments of code points (ANY_ONE for `_`), as like.ts reads it. */
  static List<int[]> segments(String pattern, char escape) {
    if (escape == '%' || escape == '_') throw new NotLinear("the escape character cannot be \"" + escape + "\"");
    List<List<Integer>> segs = new ArrayList<>();
    segs.add(new ArrayList<>());
    int[] cps = pattern.codePoints().toArray();
    int wildcards = 0;
    for (int i = 0; i < cps.length; i++) {
      int c = cps[i];
      List<Integer> current = segs.get(segs.size() - 1);
      if (c == escape) {
        if (i + 1 >= cps.length) throw new NotLinear("a LIKE pattern cannot end with the escape character \"" + escape + "\"");
        int next = cps[++i];
        if (next != '_' && next != '%' && next != escape)
          throw new NotLinear("the escape character \"" + escape + "\" may only precede \"_\", \"%\" or itself");
        current.add(next);
      } else if (c == '%') {
        if (++wildcards > MAX_WILDCARDS) throw new NotLinear("a LIKE pattern may have at most " + MAX_WILDCARDS + " \"%\"");
        segs.add(new ArrayList<>());
      } else current.add(c == '_' ? ANY_ONE : c);
    }
    List<int[]> out = new ArrayList<>();
    if (segs.size() == 1) {
      out.add(toArray(segs.get(0)));
      return out;
    }
    out.add(toArray(segs.get(0)));
    // Between the prefix and the suffix, only non-empty segments constrain anything.
    for (List<Integer> s : segs.subList(1, segs.size() - 1)) {
      if (s.isEmpty()) continue;
      if (s.contains(ANY_ONE))
        throw new NotLinear("a \"_\" may stand only before the first \"%\" or after the last one of a LIKE pattern (between two \"%\" it would need a regular expression, which can run for hours on the shared server)");
      out.add(toArray(s));
    }
    out.add(toArray(segs.get(segs.size() - 1)));
    return out;
  }

  private static int[] toArray(List<Integer> l) {
    return l.stream().mapToInt(Integer::intValue).toArray();
  }

  private static boolean hasAnyOne(int[] seg) {
    for (int c : seg) if (c == ANY_ONE) return true;
    return false;
  }

  private static String text(int[] seg, int from, int to) {
    return new String(seg, from, to - from);
  }

  private static Literal str(String s) {
    return Literal.create(s, DataTypes.StringType);
  }

  private static Literal num(int n) {
    return Literal.create(n, DataTypes.IntegerType);
  }

  /** `s LIKE pattern` in linear time, with LIKE's NULLs (NULL when `s` is NULL, else true or false). */
  static Expression like(Expression s, String pattern, char escape) {
    List<int[]> segs = segments(pattern, escape);
    Expression length = new Length(s);
    if (segs.size() == 1) {
      int[] only = segs.get(0);
      if (!hasAnyOne(only)) return new EqualTo(s, str(text(only, 0, only.length)));
      List<Expression> c = new ArrayList<>();
      c.add(new EqualTo(length, num(only.length)));
      c.addAll(inPlace(s, only, true));
      return and(c);
    }
    int[] prefix = segs.get(0);
    int[] suffix = segs.get(segs.size() - 1);
    List<int[]> inner = segs.subList(1, segs.size() - 1);
    int need = 0;
    for (int[] seg : segs) need += seg.length;
    List<Expression> conditions = new ArrayList<>();
    conditions.add(new GreaterThanOrEqual(length, num(need)));
    conditions.addAll(inPlace(s, prefix, true));
    conditions.addAll(inPlace(s, suffix, false));
    Expression found = null;
    int last = 0;
    for (int[] seg : inner) {
      Expression from = found == null ? num(prefix.length + 1) : new Add(new NullIf(found, num(0)), num(last));
      found = new StringLocate(str(text(seg, 0, seg.length)), s, from);
      last = seg.length;
    }
    if (found != null) {
      conditions.add(new GreaterThan(found, num(0)));
      conditions.add(new LessThanOrEqual(new Add(found, num(last - 1)), new Subtract(length, num(suffix.length))));
    }
    // `locate` answers a NULL start with 0 even when the text is NULL: from the second segment on,
    // a NULL text would read as "no match" (false) where LIKE says NULL.
    Expression all = and(conditions);
    return inner.size() > 1 ? new If(new IsNull(s), Literal.create(null, DataTypes.BooleanType), all) : all;
  }

  /** A prefix or suffix compared in place: whole, or its literal runs around the `_`s. */
  private static List<Expression> inPlace(Expression s, int[] seg, boolean atStart) {
    List<Expression> out = new ArrayList<>();
    if (seg.length == 0) return out;
    if (!hasAnyOne(seg)) {
      Literal t = str(text(seg, 0, seg.length));
      out.add(atStart ? new StartsWith(s, t) : new EndsWith(s, t));
      return out;
    }
    for (int k = 0; k < seg.length;) {
      if (seg[k] == ANY_ONE) {
        k++;
        continue;
      }
      int end = k;
      while (end < seg.length && seg[end] != ANY_ONE) end++;
      // 1-based from the start; from the end, a negative position counts back from the last character.
      int position = atStart ? k + 1 : -(seg.length - k);
      out.add(new EqualTo(new Substring(s, num(position), num(end - k)), str(text(seg, k, end))));
      k = end;
    }
    return out;
  }

  private static Expression and(List<Expression> c) {
    Expression out = c.get(0);
    for (Expression x : c.subList(1, c.size())) out = new And(out, x);
    return out;
  }
}
