package lakehouse.jobs.spark;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.apache.spark.QueryContext;
import org.apache.spark.connect.proto.Relation;
import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.analysis.FunctionRegistry;
import org.apache.spark.sql.catalyst.analysis.PlanWithUnresolvedIdentifier;
import org.apache.spark.sql.catalyst.analysis.RelationTimeTravel;
import org.apache.spark.sql.catalyst.analysis.UnresolvedFunction;
import org.apache.spark.sql.catalyst.analysis.UnresolvedInlineTable;
import org.apache.spark.sql.catalyst.analysis.UnresolvedRelation;
import org.apache.spark.sql.catalyst.analysis.UnresolvedTableValuedFunction;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExpressionInfo;
import org.apache.spark.sql.catalyst.expressions.Generator;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedArgumentExpression;
import org.apache.spark.sql.catalyst.expressions.aggregate.HyperLogLogPlusPlus;
import org.apache.spark.sql.catalyst.expressions.SubqueryExpression;
import org.apache.spark.sql.catalyst.plans.logical.Generate;
import org.apache.spark.sql.catalyst.plans.logical.GlobalLimit;
import org.apache.spark.sql.catalyst.plans.logical.LocalLimit;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Offset;
import org.apache.spark.sql.catalyst.plans.logical.Range;
import org.apache.spark.sql.catalyst.plans.logical.UnresolvedWith;
import org.apache.spark.sql.catalyst.plans.logical.View;
import org.apache.spark.sql.catalyst.trees.Origin;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connect.planner.SparkConnectPlanner;
import org.apache.spark.sql.connect.plugin.RelationPlugin;
import org.apache.spark.sql.execution.CommandExecutionMode;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.jdbc.JDBCRelation;
import org.sparkproject.connect.protobuf.Any;
import org.sparkproject.connect.protobuf.Descriptors;
import org.sparkproject.connect.protobuf.Message;
import scala.runtime.AbstractPartialFunction;

/**
 * A relation (`spark.connect.extensions.relation.classes`): lakehouse.jobs.TenantLogic, a tenant's
 * logic (a config expression's node with everything below it, or tenant SQL) judged strictly
 * before it can run, and returned as the analysed plan that will run, so that what runs is what
 * was judged (no time of check against time of use: a view is judged by its expansion).
 *
 *  1. Before analysis (analysis evaluates VALUES lists and LIMIT, TVF and IDENTIFIER arguments,
 *     and would load what the plan names): every plan node and expression is of an allowed class,
 *     every function a built-in whose class is on the allow-list, every table named is the
 *     tenant's (CTE names by their scope), no path tables, no STREAM, arguments that analysis
 *     evaluates are literals, SQL text has no `${…}` (Spark substitutes configuration values,
 *     environment variables and system properties into it).
 *  2. The analysed tree: nodes and expressions by class against the one allow-list (LogicClasses),
 *     subqueries' plans too, relations by identity (TenantBoundary), JDBC relations only as many
 *     as the step declared, LIKE rewritten into linear string functions (LinearLike), and what the
 *     expressions can allocate bounded by the binding's limits (SizeBounds, Range, generators).
 *
 * A refusal is LAKEHOUSE_TENANT_POLICY, an analysis error LAKEHOUSE_TENANT_ANALYSIS, both at the
 * config paths the message carries (TenantPolicyException).
 */
public final class TenantLogicPlugin implements RelationPlugin {
  @Override
  public Optional<LogicalPlan> transform(byte[] relation, SparkConnectPlanner planner) {
    Any any = PluginMessages.any(relation);
    if (any == null || !PluginMessages.TENANT_LOGIC.equals(any.getTypeUrl())) return Optional.empty();
    PluginMessages.TenantLogicRequest req = PluginMessages.tenantLogic(any.getValue());
    SparkSession session = planner.session();
    TenantBinding binding = Bindings.of(session);
    if (binding == null)
      throw TenantPolicyException.refused("tenant logic is judged only in a session bound to a tenant (the runner binds its sessions first)", req.configPaths());
    return Optional.of(new Judge(session, binding, req).judge(planner));
  }

  static final class Judge {
    private final SparkSession session;
    private final TenantBinding binding;
    private final PluginMessages.TenantLogicRequest req;
    private final Set<String> problems = new LinkedHashSet<>();

    Judge(SparkSession session, TenantBinding binding, PluginMessages.TenantLogicRequest req) {
      this.session = session;
      this.binding = binding;
      this.req = req;
    }

    /** Refuse now if anything was found (in report mode: log it, and go on). */
    private void verdict() {
      verdict(null);
    }

    private void verdict(LogicalPlan plan) {
      PolicySettings.verdict(session, binding, problems, req.configPaths(), "tenant logic", List.of(), plan);
      problems.clear();
    }

    LogicalPlan judge(SparkConnectPlanner planner) {
      try {
        return judged(planner);
      } catch (StackOverflowError e) {
        // Spark's parser and analyser, and these walks, recurse once per level of nesting: a
        // text nested thousands deep is refused, as the tenant's (it was gRPC's UNKNOWN, an internal error).
        throw TenantPolicyException.refused("the logic is nested too deeply to read or judge (parentheses, subqueries or CASEs thousands of levels deep)",
            req.configPaths());
      }
    }

    private LogicalPlan judged(SparkConnectPlanner planner) {
      protoScreen(req.relation());
      verdict();
      LogicalPlan parsed;
      try {
        parsed = planner.transformRelation(req.relation());
      } catch (Exception e) {
        throw failure(e);
      }
      // First, and alone: the other walks are linear only in a plan of bounded expanded size.
      long size = new PlanSize().of(parsed);
      if (size > binding.limits.planNodes())
        problems.add("the logic expands to " + (size == Long.MAX_VALUE ? "more than 9.2e18" : String.valueOf(size))
            + " plan and expression nodes (CTE references, grouping sets and repeated expressions counted as what they expand to), more than the platform allows (limits.plan-nodes "
            + binding.limits.planNodes() + "): the server analyses and optimizes it in the memory every tenant shares");
      verdict();
      new Parsed().plan(parsed, new HashSet<>());
      verdict();
      LogicalPlan analyzed;
      try {
        QueryExecution qe = session.sessionState().executePlan(parsed, CommandExecutionMode.SKIP());
        qe.assertAnalyzed();
        analyzed = qe.analyzed();
      } catch (Exception e) {
        throw failure(e);
      }
      LogicalPlan linear;
      try {
        linear = analyzed.transformAllExpressionsWithSubqueries(new AbstractPartialFunction<Expression, Expression>() {
          @Override
          public boolean isDefinedAt(Expression e) {
            return true;
          }

          @Override
          public Expression apply(Expression e) {
            return LinearLike.rewrite(e);
          }
        });
      } catch (LinearLike.NotLinear e) {
        problems.add(e.getMessage());
        verdict();
        linear = analyzed;
      }
      Analysed a = new Analysed();
      a.plan(linear);
      if (a.jdbc > req.jdbcSources()) problems.add("a JDBC relation the step does not declare");
      problems.addAll(TenantBoundary.problems(session, binding, linear));
      verdict(linear);
      return linear;
    }

    /** What failed while the logic was read or analysed: a refusal at its config paths, an analysis error, or as it was. */
    private RuntimeException failure(Exception e) {
      if (e instanceof TenantPolicyException t) return rethrown(t);
      if (e instanceof AnalysisException a) return analysisError(a, a.getCondition(), a.getMessageParameters(), a.line(), a.startPosition(), a.getQueryContext());
      if (e instanceof RuntimeException r) return r;
      return new IllegalStateException(e);
    }

    /** A refusal of the boundary (inside the analysis) is this logic's: at its config paths. */
    private TenantPolicyException rethrown(TenantPolicyException e) {
      if (!e.getMessageParameters().getOrDefault("configPaths", "").isEmpty()) return e;
      return TenantPolicyException.refused(e.getMessageParameters().getOrDefault("reason", "refused"), req.configPaths());
    }

    // ---- 0. the relation as sent ----

    /** SQL text without `${`, and no plugin relation inside (tenant logic is judged once, here). */
    private void protoScreen(Message m) {
      Deque<Message> todo = new ArrayDeque<>();
      todo.push(m);
      int visited = 0;
      while (!todo.isEmpty()) {
        Message x = todo.pop();
        if (++visited > 1_000_000) {
          problems.add("the relation is too large to judge");
          return;
        }
        if (x instanceof org.apache.spark.connect.proto.SQL sql && sql.getQuery().contains("${"))
          problems.add("${…} is not allowed in SQL text (Spark substitutes configuration values, environment variables and system properties into it)");
        if (x instanceof Relation r && r.getRelTypeCase() == Relation.RelTypeCase.EXTENSION) problems.add("a server plugin relation inside tenant logic");
        for (Map.Entry<Descriptors.FieldDescriptor, Object> f : x.getAllFields().entrySet()) {
          if (f.getKey().getJavaType() != Descriptors.FieldDescriptor.JavaType.MESSAGE) continue;
          if (f.getKey().isRepeated()) for (Object o : (List<?>) f.getValue()) todo.push((Message) o);
          else todo.push((Message) f.getValue());
        }
      }
    }

    // ---- 1. before analysis ----

    private String at(Origin o) {
      if (!o.line().isDefined()) return "";
      Object start = Scala.orNull(o.startPosition());
      return " (line " + o.line().get() + ", column " + (start instanceof Integer i ? i + 1 : 1) + ")";
    }

    final class Parsed {
      void plan(LogicalPlan p, Set<String> ctes) {
        if (p.analyzed()) return; // read by Spark Connect's planner already (a data source): judged after analysis
        String cls = p.getClass().getName();
        if (!LogicClasses.PARSED_NODES.contains(cls)) {
          problems.add("plan node " + p.nodeName() + at(p.origin()) + " is not allowed in tenant logic (a query only)");
          return;
        }
        if (p instanceof UnresolvedWith w) {
          Set<String> scope = new HashSet<>(ctes);
          for (var def : Scala.list(w.cteRelations())) {
            if (w.allowRecursion()) scope.add(def._1().toLowerCase(Locale.ROOT));
            plan(def._2(), scope);
            scope.add(def._1().toLowerCase(Locale.ROOT));
          }
          plan(w.child(), scope);
          return;
        }
        if (p instanceof UnresolvedRelation r) relation(Scala.list(r.multipartIdentifier()), r.isStreaming(), ctes, r.origin());
        else if (p instanceof UnresolvedInlineTable t) {
          for (var row : Scala.list(t.rows())) for (Expression cell : Scala.list(row)) literalOnly(cell, "a VALUES list");
        } else if (p instanceof UnresolvedTableValuedFunction f) {
          List<String> name = Scala.list(f.name());
          String fn = name.get(name.size() - 1).toLowerCase(Locale.ROOT);
          if (name.size() != 1 || !LogicClasses.TABLE_FUNCTIONS.contains(fn)) problems.add("table function " + String.join(".", name) + at(f.origin()) + " is not allowed");
          if (fn.equals("range")) for (Expression a : Scala.list(f.functionArgs())) literalOnly(a, "range's arguments");
        } else if (p instanceof PlanWithUnresolvedIdentifier i) {
          Object name = i.identifierExpr() instanceof Literal l ? SizeBounds.constant(l) : null;
          if (!(name instanceof String s)) problems.add("IDENTIFIER(…)" + at(p.origin()) + " needs a literal name");
          else {
            try {
              relation(Scala.list(session.sessionState().sqlParser().parseMultipartIdentifier(s)), false, ctes, p.origin());
            } catch (Exception e) {
              problems.add("IDENTIFIER(…)" + at(p.origin()) + " does not name a table");
            }
          }
        } else if (p instanceof RelationTimeTravel t) {
          // VERSION/TIMESTAMP AS OF: its table (a leaf's field, not a child) and a literal point in time.
          plan(t.relation(), ctes);
          if (t.timestamp().isDefined()) literalOnly(t.timestamp().get(), "TIMESTAMP AS OF");
        } else if (p instanceof GlobalLimit g) literalOnly(g.limitExpr(), "LIMIT");
        else if (p instanceof LocalLimit g) literalOnly(g.limitExpr(), "LIMIT");
        else if (p instanceof Offset o) literalOnly(o.offsetExpr(), "OFFSET");
        for (Expression e : Scala.list(p.expressions())) expression(e, ctes);
        for (LogicalPlan c : Scala.list(p.children())) plan(c, ctes);
      }

      /** A table name as the tenant wrote it, resolved as Spark resolves it: a CTE in scope, or a catalog's table. */
      void relation(List<String> parts, boolean streaming, Set<String> ctes, Origin origin) {
        String written = String.join(".", parts);
        if (streaming) {
          problems.add("STREAM " + written + at(origin) + " is not allowed (a streaming read)");
          return;
        }
        if (parts.size() == 1 && ctes.contains(parts.get(0).toLowerCase(Locale.ROOT))) return;
        var catalogs = session.sessionState().catalogManager();
        String catalog;
        List<String> rest;
        if (parts.size() >= 3 && catalogs.isCatalogRegistered(parts.get(0))) {
          catalog = parts.get(0);
          rest = parts.subList(1, parts.size());
        } else if (parts.size() == 2 && PATH_FORMATS.contains(parts.get(0).toLowerCase(Locale.ROOT))) {
          problems.add("path-based table " + written + at(origin) + " is not allowed: read tables by name");
          return;
        } else {
          catalog = catalogs.currentCatalog().name();
          rest = parts;
        }
        if (rest.size() != 2 || !binding.mayRead(catalog, new String[] {rest.get(0)}))
          problems.add("table " + written + at(origin) + " is outside the tenant's namespaces");
      }

      void expression(Expression e, Set<String> ctes) {
        String cls = e.getClass().getName();
        if (!LogicClasses.PARSED_EXPRESSIONS.contains(cls)) {
          problems.add("expression " + e.prettyName() + at(e.origin()) + " is not allowed in tenant logic" + reasonOf(cls));
          return;
        }
        if (e instanceof UnresolvedFunction f) function(f);
        if (e instanceof SubqueryExpression s) plan(s.plan(), ctes);
        for (Expression c : Scala.list(e.children())) expression(c, ctes);
      }

      /** A function call: a built-in (no temporary or catalog function: their classes load during analysis) of an allowed class. */
      void function(UnresolvedFunction f) {
        List<String> parts = Scala.list(f.nameParts());
        String name = parts.get(parts.size() - 1).toLowerCase(Locale.ROOT);
        boolean builtin = parts.size() == 1
            || (parts.size() == 2 && parts.get(0).equalsIgnoreCase("builtin"))
            || (parts.size() == 3 && parts.get(0).equalsIgnoreCase("system") && parts.get(1).equalsIgnoreCase("builtin"));
        ExpressionInfo info = builtin ? Scala.orNull(FunctionRegistry.builtin().lookupFunction(new FunctionIdentifier(name))) : null;
        if (info == null) {
          problems.add("function " + String.join(".", parts) + at(f.origin()) + " is not a built-in function");
          return;
        }
        String cls = info.getClassName();
        if (!LogicClasses.PARSED_EXPRESSIONS.contains(cls) && !BUILDERS.contains(cls))
          problems.add("function " + name + at(f.origin()) + " is not allowed in tenant logic" + reasonOf(cls));
        // Analysis already builds the sketch's buffer fields (3.3 million of them took 20 s of the
        // server's driver at 0.0002): its error is judged here, before analysis (WorkBounds).
        if (cls.equals(HyperLogLogPlusPlus.class.getName())) {
          List<Expression> args = Scala.list(f.arguments());
          Expression rsd = args.size() < 2 ? null : args.get(1) instanceof NamedArgumentExpression n ? n.value() : args.get(1);
          Object v = rsd == null ? Double.valueOf(WorkBounds.MIN_RELATIVE_ERROR) : SizeBounds.constant(rsd);
          if (v instanceof org.apache.spark.sql.types.Decimal d) v = d.toDouble();
          if (!(v instanceof Number x) || !(x.doubleValue() >= WorkBounds.MIN_RELATIVE_ERROR))
            problems.add("approx_count_distinct" + at(f.origin()) + "'s relative error must be a literal of at least " + WorkBounds.MIN_RELATIVE_ERROR + " (it is " + v
                + "): its sketch's state doubles with every halving of the error, in every group, and holds the shared server's memory");
        }
      }

      /** What analysis evaluates (VALUES, LIMIT, TVF arguments) must be a literal. */
      void literalOnly(Expression e, String where) {
        Expression x = e instanceof Alias a ? a.child() : e;
        if (SizeBounds.constant(x) == null && !(x instanceof Literal) && !isNegatedLiteral(x))
          problems.add(where + at(e.origin()) + " may hold only literals");
      }

      private boolean isNegatedLiteral(Expression x) {
        String cls = x.getClass().getSimpleName();
        return (cls.equals("UnaryMinus") || cls.equals("UnaryPositive")) && Scala.list(x.children()).get(0) instanceof Literal;
      }
    }

    private static String reasonOf(String cls) {
      if (cls.endsWith("CallMethodViaReflection") || cls.endsWith("TryReflect")) return ": reflection runs Java code on the shared server";
      if (cls.contains("RegExp") || cls.endsWith("RLike") || cls.endsWith("StringSplit") || cls.endsWith("StringToMap"))
        return ": Spark runs it as a regular expression, which can backtrack for hours on the shared server (use startswith, endswith, contains, locate, replace, split_part or LIKE)";
      if (cls.endsWith("InputFileName") || cls.endsWith("InputFileBlockStart") || cls.endsWith("InputFileBlockLength") || cls.endsWith("CurrentUser")
          || cls.endsWith("SparkVersion") || cls.endsWith("CurrentDatabase") || cls.endsWith("CurrentCatalog"))
        return ": it discloses the server or the session, not the row";
      return "";
    }

    /** Table-valued relation names Spark reads as a path (`parquet.`/path``, `delta.`/path``). */
    private static final Set<String> PATH_FORMATS = Set.of(
        "parquet", "delta", "csv", "json", "orc", "text", "avro", "binaryfile", "iceberg", "jdbc", "hive", "xml", "kafka", "noop");

    /** Built-ins registered through a builder class: their expressions are judged after analysis like every other. */
    private static final Set<String> BUILDERS = prefixed("org.apache.spark.sql.catalyst.expressions.",
        "LPadExpressionBuilder", "RPadExpressionBuilder", "StartsWithExpressionBuilder", "EndsWithExpressionBuilder", "ContainsExpressionBuilder",
        "CeilExpressionBuilder", "FloorExpressionBuilder", "DatePartExpressionBuilder", "MakeTimestampExpressionBuilder",
        "MakeTimestampNTZExpressionBuilder", "MakeTimestampLTZExpressionBuilder", "ParseToTimestampNTZExpressionBuilder",
        "ParseToTimestampLTZExpressionBuilder", "TryToTimestampExpressionBuilder", "ExplodeExpressionBuilder", "PosExplodeExpressionBuilder",
        "InlineExpressionBuilder", "HourExpressionBuilder", "MinuteExpressionBuilder", "SecondExpressionBuilder", "CurDateExpressionBuilder",
        "TryToDateExpressionBuilder");

    private static Set<String> prefixed(String prefix, String... names) {
      Set<String> out = new HashSet<>();
      for (String n : names) out.add(prefix + n);
      return Set.copyOf(out);
    }

    // ---- 2. after analysis ----

    final class Analysed {
      int jdbc;
      final SizeBounds sizes = new SizeBounds(binding.limits);
      private String view;

      void plan(LogicalPlan p) {
        String cls = p.getClass().getName();
        if (p instanceof LogicalRelation r && r.relation() instanceof JDBCRelation) jdbc++;
        if (!LogicClasses.NODES.contains(cls) && !LogicClasses.RELATIONS.contains(cls)) {
          problem("plan node " + p.nodeName() + " (" + cls + ") is not allowed in tenant logic");
          return;
        }
        if (p instanceof Range r && r.numElements().compare(scala.math.BigInt.apply(binding.limits.generatedRows())) > 0)
          problem("range(…) produces " + r.numElements() + " rows, more than the platform allows (limits.generated-rows " + binding.limits.generatedRows() + ")");
        if (p instanceof Generate g && !(g.generator() instanceof Generator)) problem("a generator that is not a built-in one");
        String costly = WorkBounds.problem(p);
        if (costly != null) problem(costly);
        for (Expression e : Scala.list(p.expressions())) {
          expression(e);
          try {
            sizes.of(e);
          } catch (SizeBounds.TooLarge t) {
            problem(t.getMessage());
          }
        }
        String outer = view;
        if (p instanceof View v && view == null) view = v.desc().identifier().unquotedString();
        for (LogicalPlan c : Scala.list(p.children())) plan(c);
        view = outer;
      }

      void expression(Expression e) {
        expression(e, null);
      }

      void expression(Expression e, Expression parent) {
        String cls = e.getClass().getName();
        if (!LogicClasses.EXPRESSIONS.contains(cls)) {
          String in = parent == null ? "" : " (in " + parent.prettyName() + ")";
          problem("function " + e.prettyName() + " (" + cls.substring(cls.lastIndexOf('.') + 1) + ")" + in + " is not allowed in tenant logic" + reasonOf(cls));
          return;
        }
        String costly = WorkBounds.problem(e, binding.limits);
        if (costly != null) problem(costly);
        if (e instanceof SubqueryExpression s) plan(s.plan());
        // A function Spark replaces by its implementation (to_json's Invoke of an evaluator) is
        // judged as the function: its replacement is Spark's code over the same arguments.
        for (Expression c : Scala.list(e.children())) expression(c, e);
      }

      private void problem(String p) {
        problems.add(view == null ? p : "view " + view + ": " + p);
      }
    }

    // ---- analysis errors ----

    /**
     * The tenant's own mistake, named as Spark found it, with only what may be shown: the error
     * class, the name the tenant wrote (a column, table or function), its position in the SQL text
     * sent, and for an unknown column Spark's suggestions (every relation named is the tenant's:
     * the check before analysis refused any other). Never Spark's message, which prints the plan.
     */
    private TenantPolicyException analysisError(Exception e, String condition, Map<String, String> params, scala.Option<Object> line,
        scala.Option<Object> start, QueryContext[] contexts) {
      String errorClass = condition == null ? "ANALYSIS_ERROR" : condition;
      Map<String, String> out = new LinkedHashMap<>();
      out.put("configPaths", String.join("\n", req.configPaths()));
      out.put("errorClass", errorClass);
      // A name or token the tenant wrote; a parse error's `error` is the token where parsing stopped.
      String object = firstOf(params, "objectName", "relationName", "routineName", "functionName", "fieldName", "columnName", "error");
      if (object != null) out.put("objectName", object);
      if (line.isDefined()) out.put("line", String.valueOf(line.get()));
      if (start.isDefined()) out.put("column", String.valueOf((Integer) start.get() + 1));
      for (QueryContext c : contexts == null ? new QueryContext[0] : contexts) {
        if (c.startIndex() >= 0) out.put("startIndex", String.valueOf(c.startIndex()));
        if (c.stopIndex() >= 0) out.put("stopIndex", String.valueOf(c.stopIndex()));
        break;
      }
      if (errorClass.startsWith("UNRESOLVED_COLUMN") && params.containsKey("proposal")) out.put("suggestions", params.get("proposal"));
      String where = out.containsKey("line") ? " at line " + out.get("line") + ", column " + out.getOrDefault("column", "?") : "";
      String summary = errorClass + (object != null ? ": " + object : "") + where;
      TenantPolicyException t = TenantPolicyException.analysis(summary, out);
      return t;
    }

    private static String firstOf(Map<String, String> params, String... keys) {
      for (String k : keys) if (params.containsKey(k)) return params.get(k);
      return null;
    }
  }
}
