package lakehouse.jobs.spark;

import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.UnaryMinus;
import org.apache.spark.sql.catalyst.expressions.UnaryPositive;
import org.apache.spark.sql.types.AtomicType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StringType;

/**
 * How large a value tenant logic can build, bounded from the analysed expression tree alone: at
 * most `factor` times the row it reads plus `constant` characters (the same model as the config
 * expressions' bound, src/core/expression/size.ts). Spark builds each value in one piece of heap,
 * and a task that runs out of it ends the server's JVM for every tenant; so the functions that
 * multiply a value's size take their multiplier as a literal (repeat, lpad/rpad, space,
 * array_repeat, sequence, replace, format_string's widths), and the whole tree's growth, nested
 * calls multiplying, stays under the binding's limits. What the row holds is the data's.
 *
 * The distinct columns of one row partition it: `struct(*)` or `concat(a, b)` is one row's worth
 * (factor 1), `concat(a, a)` two.
 */
final class SizeBounds {
  record Bound(long factor, long constant) {
    static final Bound ZERO = new Bound(0, 0);
    /** A number, date or boolean: at most this many characters printed (a bigint's 20, a timestamp's 29, a decimal's 40). */
    static final Bound SCALAR = new Bound(0, 40);
    static final Bound ROW = new Bound(1, 0);

    Bound plus(Bound o) {
      return new Bound(add(factor, o.factor), add(constant, o.constant));
    }

    Bound times(long n) {
      return new Bound(mul(factor, n), mul(constant, n));
    }

    Bound max(Bound o) {
      return new Bound(Math.max(factor, o.factor), Math.max(constant, o.constant));
    }
  }

  static final class TooLarge extends RuntimeException {
    private static final long serialVersionUID = 1L;

    TooLarge(String message) {
      super(message, null, false, false);
    }
  }

  private final TenantBinding.Limits limits;
  private final Map<Expression, Bound> memo = new IdentityHashMap<>();

  SizeBounds(TenantBinding.Limits limits) {
    this.limits = limits;
  }

  /** The bound of `e`; throws TooLarge at the first node whose bound exceeds the limits or cannot be bounded. */
  Bound of(Expression e) {
    Bound b = memo.get(e);
    if (b != null) return b;
    b = compute(e);
    if (b.factor > limits.valueFactor() || b.constant > limits.valueChars())
      throw new TooLarge(e.prettyName() + " can build a value of " + describe(b) + ", more than the platform allows (limits.value-factor "
          + limits.valueFactor() + " times the row, limits.value-chars " + limits.valueChars()
          + "): Spark builds each value in one piece of memory, and one too large for it ends the shared server for every tenant");
    memo.put(e, b);
    return b;
  }

  private static String describe(Bound b) {
    if (b.factor == 0) return b.constant + " characters";
    return b.factor + " times the row" + (b.constant > 0 ? " plus " + b.constant + " characters" : "");
  }

  private Bound compute(Expression e) {
    String cls = e.getClass().getName();
    String name = cls.substring(cls.lastIndexOf('.') + 1);
    List<Expression> kids = Scala.list(e.children());
    if (e instanceof Attribute) return Bound.ROW;
    if (e instanceof Literal l) return literal(l);
    if (LogicClasses.SCALAR.contains(cls) || LogicClasses.AGGREGATES.contains(cls) || cls.equals(LogicClasses.AGGREGATE_EXPRESSION)) {
      for (Expression k : kids) of(k);
      return Bound.SCALAR;
    }
    switch (name) {
      case "Cast", "UpCast" -> {
        Bound child = of(kids.get(0));
        return isText(e.dataType()) ? child.max(Bound.SCALAR) : e.dataType() instanceof AtomicType ? Bound.SCALAR : child;
      }
      case "Concat", "CreateArray", "CreateNamedStruct", "Overlay" -> {
        return sum(kids);
      }
      case "ConcatWs" -> {
        // The separator stands between every two of the others, and between an array's elements:
        // at most one per element, of which an array holds no more than its own size (a literal
        // array: collection-elements). A separator computed from the row would multiply the row.
        if (kids.isEmpty()) return Bound.ZERO;
        Bound sep = of(kids.get(0));
        List<Expression> rest = kids.subList(1, kids.size());
        Bound out = sum(rest).plus(sep.times(Math.max(0, rest.size() - 1)));
        for (Expression k : rest) {
          if (!(k.dataType() instanceof org.apache.spark.sql.types.ArrayType)) continue;
          if (sep.factor > 0) throw new TooLarge("concat_ws's separator must be a literal when it joins an array's elements");
          Bound elements = of(k).plus(new Bound(0, limits.collectionElements()));
          out = out.plus(new Bound(mul(sep.constant, elements.factor), mul(sep.constant, elements.constant)));
        }
        return out;
      }
      case "StringRepeat" -> {
        return of(kids.get(0)).times(count(kids.get(1), "repeat's count", limits.valueChars()));
      }
      case "StringLPad", "StringRPad" -> {
        of(kids.get(0));
        of(kids.get(2));
        return new Bound(0, count(kids.get(1), e.prettyName() + "'s length", limits.valueChars()));
      }
      case "StringSpace" -> {
        return new Bound(0, count(kids.get(0), "space's count", limits.valueChars()));
      }
      case "ArrayRepeat" -> {
        return of(kids.get(0)).times(count(kids.get(1), "array_repeat's count", limits.collectionElements()));
      }
      case "Sequence" -> {
        return Bound.SCALAR.times(sequenceLength(kids));
      }
      case "StringReplace" -> {
        Bound s = of(kids.get(0));
        String search = text(kids.get(1));
        String replacement = kids.size() > 2 ? text(kids.get(2)) : "";
        if (search == null || replacement == null) throw new TooLarge("replace's search and replacement must be literals: they multiply the size of the value");
        // Spark leaves the value as it is for an empty search.
        return search.isEmpty() ? s : s.times(Math.max(1, (replacement.length() + search.length() - 1) / search.length()));
      }
      case "Lower", "Upper", "InitCap" -> {
        // Case mapping can lengthen a character (ß to SS): at most three.
        return of(kids.get(0)).times(3);
      }
      case "StringTranslate" -> {
        return of(kids.get(0)).times(2);
      }
      case "Hex", "Base64" -> {
        return of(kids.get(0)).times(2).plus(new Bound(0, 4));
      }
      case "DateFormatClass" -> {
        of(kids.get(0));
        // A pattern letter prints at most a month or day name.
        return of(kids.get(1)).times(16).plus(new Bound(0, 64));
      }
      case "FormatString" -> {
        String format = kids.isEmpty() ? null : text(kids.get(0));
        if (format == null) throw new TooLarge("format_string's format must be a literal: its widths set the size of the value");
        return sum(kids.subList(1, kids.size())).times(2).plus(new Bound(0, formatWidths(format)));
      }
      case "StructsToJson" -> {
        // Quotes, escapes (\\uXXXX for a control character) and field names around the row's values.
        return sum(kids).times(6).plus(new Bound(0, 1024));
      }
      case "Stack" -> {
        count(kids.get(0), "stack's row count", limits.generatedRows());
        return sum(kids.subList(1, kids.size()));
      }
      default -> {
        if (LogicClasses.BOUNDED_BY_INPUTS.contains(cls)) {
          Bound b = Bound.ZERO;
          for (Expression k : kids) b = b.max(of(k));
          return b;
        }
        if (e.dataType() instanceof AtomicType && !isText(e.dataType())) {
          for (Expression k : kids) of(k);
          return Bound.SCALAR;
        }
        throw new TooLarge("the size of what " + e.prettyName() + " builds cannot be bounded");
      }
    }
  }

  /** The children's bounds added up, the distinct columns of the row counting once in all. */
  private Bound sum(List<Expression> kids) {
    Bound b = Bound.ZERO;
    List<Attribute> columns = new ArrayList<>();
    for (Expression k : kids) {
      if (k instanceof Attribute a) {
        if (columns.stream().anyMatch(c -> c.exprId().equals(a.exprId()))) b = b.plus(Bound.ROW);
        columns.add(a);
      } else b = b.plus(of(k));
    }
    return columns.isEmpty() ? b : b.plus(Bound.ROW);
  }

  private static Bound literal(Literal l) {
    Object v = l.value();
    if (v == null) return Bound.ZERO;
    if (isText(l.dataType())) return new Bound(0, v.toString().length());
    if (l.dataType() instanceof BinaryType && v instanceof byte[] b) return new Bound(0, b.length);
    return l.dataType() instanceof AtomicType ? Bound.SCALAR : new Bound(0, v.toString().length());
  }

  private static boolean isText(DataType t) {
    return t instanceof StringType;
  }

  /** A whole-number constant argument at most `max`, or TooLarge. */
  private long count(Expression e, String what, long max) {
    Object v = constant(e);
    if (!(v instanceof Number n) || v instanceof Double || v instanceof Float)
      throw new TooLarge(what + " must be a literal: it multiplies the size of what is built, which must be bounded before the run");
    long c = n.longValue();
    if (c > max) throw new TooLarge(what + " is " + c + ", more than the platform allows (" + max + ")");
    return Math.max(0, c);
  }

  private long sequenceLength(List<Expression> kids) {
    Object start = constant(kids.get(0));
    Object stop = constant(kids.get(1));
    Object step = kids.size() > 2 ? constant(kids.get(2)) : null;
    if (!(start instanceof Number a) || !(stop instanceof Number b) || (kids.size() > 2 && !(step instanceof Number)))
      throw new TooLarge("sequence's start, stop and step must be whole-number literals: they set how many elements it builds");
    long s = step == null ? (b.longValue() >= a.longValue() ? 1 : -1) : ((Number) step).longValue();
    if (s == 0) throw new TooLarge("sequence's step must not be 0");
    java.math.BigInteger n = java.math.BigInteger.valueOf(b.longValue()).subtract(java.math.BigInteger.valueOf(a.longValue()))
        .divide(java.math.BigInteger.valueOf(s)).add(java.math.BigInteger.ONE);
    if (n.signum() < 0) return 0;
    if (n.compareTo(java.math.BigInteger.valueOf(limits.collectionElements())) > 0)
      throw new TooLarge("sequence builds " + n + " elements, more than the platform allows (limits.collection-elements " + limits.collectionElements() + ")");
    return n.longValue();
  }

  /** The value of an expression made only of literals and casts of them (cheap to evaluate), else null. */
  static Object constant(Expression e) {
    if (!constantTree(e)) return null;
    try {
      Object v = e.eval(null);
      return v instanceof org.apache.spark.unsafe.types.UTF8String u ? u.toString() : v;
    } catch (RuntimeException ex) {
      return null;
    }
  }

  private static boolean constantTree(Expression e) {
    if (e instanceof Literal) return true;
    if (e instanceof Cast || e instanceof UnaryMinus || e instanceof UnaryPositive) return constantTree(Scala.list(e.children()).get(0));
    return false;
  }

  private static String text(Expression e) {
    Object v = constant(e);
    return v instanceof String s ? s : null;
  }

  /** The characters a format string's widths and precisions can add (each `%…N…` adds at most N besides its argument). */
  private long formatWidths(String format) {
    long total = format.length();
    var m = java.util.regex.Pattern.compile("%(?:\\d+\\$)?[-#+ 0,(<]*(\\d+)?(?:\\.(\\d+))?").matcher(format);
    while (m.find()) {
      for (int g = 1; g <= 2; g++) {
        String d = m.group(g);
        if (d == null) continue;
        if (d.length() > 9) throw new TooLarge("format_string's width " + d + " is more than the platform allows");
        total = add(total, Long.parseLong(d));
      }
    }
    if (total > limits.valueChars()) throw new TooLarge("format_string's widths add " + total + " characters, more than the platform allows (" + limits.valueChars() + ")");
    return total;
  }

  private static long add(long a, long b) {
    long r = a + b;
    return ((a ^ r) & (b ^ r)) < 0 ? Long.MAX_VALUE : r;
  }

  private static long mul(long a, long b) {
    if (a == 0 || b == 0) return 0;
    long hi = Math.multiplyHigh(a, b);
    long lo = a * b;
    return hi == 0 && lo >= 0 ? lo : Long.MAX_VALUE;
  }
}
