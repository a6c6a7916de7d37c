package lakehouse.jobs.spark;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.analysis.UnresolvedProcedure;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.parser.ParameterContext;
import org.apache.spark.sql.catalyst.parser.ParseException;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.plans.logical.Call;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

/**
 * The SQL parser of every session (TenantPolicyExtensions, around Delta's and Iceberg's): in a bound
 * session a CALL is judged as it is parsed. Spark runs a procedure while it analyses the CALL
 * (InvokeProcedures), before the tenant boundary's check rule sees the plan; a procedure the
 * boundary would refuse must not have run by then. Everything else is the delegate's.
 */
final class TenantParser implements ParserInterface {
  private final SparkSession session;
  private final ParserInterface delegate;

  TenantParser(org.apache.spark.sql.SparkSession session, ParserInterface delegate) {
    this.session = (SparkSession) session;
    this.delegate = delegate;
  }

  private LogicalPlan judged(LogicalPlan plan) {
    TenantBinding binding = Bindings.of(session);
    if (binding == null) return plan;
    List<Call> calls = new ArrayList<>();
    collect(plan, calls, 0);
    if (calls.isEmpty()) return plan;
    TenantBoundary.Walk walk = new TenantBoundary.Walk(session, binding);
    for (Call c : calls) {
      if (c.procedure() instanceof UnresolvedProcedure up) walk.parsedCall(Scala.list(up.nameParts()), Scala.list(c.args()));
      else walk.problem("a procedure call the server did not resolve");
    }
    PolicySettings.verdict(session, binding, walk.problems, List.of(), "tenant boundary", walk.details, null);
    // Judged (or only reported): the tables the procedures maintain, for their internal reads and writes.
    binding.maintaining(walk.procedureTables);
    return plan;
  }

  /** Every CALL in a parsed plan (a statement, a script's statements); a tree too deep is refused. */
  private static void collect(LogicalPlan p, List<Call> out, int depth) {
    if (depth > 1000) throw TenantPolicyException.refused("a statement nested too deeply", List.of());
    if (p instanceof Call c) out.add(c);
    for (LogicalPlan c : Scala.list(p.children())) collect(c, out, depth + 1);
    for (Object c : Scala.list(p.innerChildren())) if (c instanceof LogicalPlan lp) collect(lp, out, depth + 1);
  }

  @Override
  public LogicalPlan parsePlan(String sqlText) throws ParseException {
    return judged(delegate.parsePlan(sqlText));
  }

  @Override
  public LogicalPlan parsePlanWithParameters(String sqlText, ParameterContext context) throws ParseException {
    return judged(delegate.parsePlanWithParameters(sqlText, context));
  }

  @Override
  public LogicalPlan parseQuery(String sqlText) throws ParseException {
    return judged(delegate.parseQuery(sqlText));
  }

  @Override
  public Expression parseExpression(String sqlText) throws ParseException {
    return delegate.parseExpression(sqlText);
  }

  @Override
  public TableIdentifier parseTableIdentifier(String sqlText) throws ParseException {
    return delegate.parseTableIdentifier(sqlText);
  }

  @Override
  public FunctionIdentifier parseFunctionIdentifier(String sqlText) throws ParseException {
    return delegate.parseFunctionIdentifier(sqlText);
  }

  @Override
  public scala.collection.immutable.Seq<String> parseMultipartIdentifier(String sqlText) throws ParseException {
    return delegate.parseMultipartIdentifier(sqlText);
  }

  @Override
  public StructType parseRoutineParam(String sqlText) throws ParseException {
    return delegate.parseRoutineParam(sqlText);
  }

  @Override
  public StructType parseTableSchema(String sqlText) throws ParseException {
    return delegate.parseTableSchema(sqlText);
  }

  @Override
  public DataType parseDataType(String sqlText) throws ParseException {
    return delegate.parseDataType(sqlText);
  }
}
