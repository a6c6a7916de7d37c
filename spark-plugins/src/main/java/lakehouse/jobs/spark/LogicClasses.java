package lakehouse.jobs.spark;

import java.util.HashSet;
import java.util.Set;

/**
 * The one allow-list of tenant logic (TenantLogicPlugin): the logical plan nodes and the
 * expression classes an analysed tenant plan may hold, resolved functions by their expression
 * class. Not on it, so refused wherever they come from: reflection (CallMethodViaReflection),
 * UDFs (ScalaUDF, PythonUDF), lambdas, what reads files or discloses the server (InputFileName,
 * read_files, current_user, version), regular expressions (RLike, RegExpReplace, StringSplit …;
 * LIKE is rewritten into linear string functions first, LinearLike), collect_list/collect_set,
 * commands, hints, streaming relations. docs/security-policy.md explains the groups.
 */
final class LogicClasses {
  private static final String E = "org.apache.spark.sql.catalyst.expressions.";
  private static final String AGG = E + "aggregate.";
  private static final String L = "org.apache.spark.sql.catalyst.plans.logical.";
  private static final String A = "org.apache.spark.sql.catalyst.analysis.";

  /** Analysed plan nodes: rows in, rows out, and the relation leaves (judged by identity). */
  static final Set<String> NODES = union(names(L,
      "Project", "Filter", "Aggregate", "Window", "Join", "Sort", "GlobalLimit", "LocalLimit", "Offset", "Deduplicate", "Distinct", "Union",
      "Intersect", "Except", "Expand", "Generate", "SubqueryAlias", "WithCTE", "CTERelationDef", "CTERelationRef", "View", "LateralJoin",
      "RepartitionByExpression", "Repartition", "Sample", "LocalRelation", "OneRowRelation", "Range"),
      // VALUES rows (literals, as the check before analysis saw them) and pipe syntax's marker.
      Set.of(A + "ResolvedInlineTable", E + "PipeOperator"));

  static final Set<String> RELATIONS = Set.of(
      "org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation", "org.apache.spark.sql.execution.datasources.LogicalRelation");

  /** Plan nodes as the parser (and Spark Connect's planner) leave them, before analysis. */
  static final Set<String> PARSED_NODES = union(NODES, RELATIONS, names(A,
      "UnresolvedRelation", "UnresolvedInlineTable", "UnresolvedTableValuedFunction", "UnresolvedSubqueryColumnAliases", "UnresolvedHaving",
      "PlanWithUnresolvedIdentifier", "UnresolvedTVFAliases", "RelationTimeTravel"), names(L,
      "UnresolvedWith", "WithWindowDefinition", "Pivot", "Unpivot", "DataFrameDropColumns"));

  /** Table-valued functions tenant logic may call (their literal arguments are bounded, SizeBounds). */
  static final Set<String> TABLE_FUNCTIONS = Set.of("range", "explode", "explode_outer", "posexplode", "posexplode_outer", "inline", "inline_outer", "stack");

  /** Expressions whose value is a number, boolean, date, timestamp or interval: bounded whatever their inputs. */
  static final Set<String> SCALAR = names(E,
      "And", "Or", "Not", "EqualTo", "EqualNullSafe", "EqualNull", "LessThan", "LessThanOrEqual", "GreaterThan", "GreaterThanOrEqual", "In", "InSet",
      "IsNull", "IsNotNull", "IsNaN", "IsUnknown", "IsNotUnknown", "Between", "AtLeastNNonNulls", "Add", "Subtract", "Multiply", "Divide",
      "IntegralDivide", "Remainder", "Pmod", "UnaryMinus", "UnaryPositive", "Abs", "TryAdd", "TrySubtract", "TryMultiply", "TryDivide", "TryMod",
      "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "BitwiseCount", "ShiftLeft", "ShiftRight", "ShiftRightUnsigned", "Round", "BRound",
      "RoundCeil", "RoundFloor", "Floor", "Ceil", "Signum", "Sqrt", "Cbrt", "Pow", "Exp", "Expm1", "Log", "Log10", "Log2", "Log1p", "Logarithm",
      "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Atan2", "Sinh", "Cosh", "Tanh", "Hypot", "ToDegrees", "ToRadians", "WidthBucket", "Pi",
      "EulerNumber", "Factorial", "NaNvl", "NullIfZero", "ZeroIfNull", "Length", "BitLength", "OctetLength", "StartsWith", "EndsWith", "Contains",
      "StringInstr", "StringLocate", "Ascii", "Crc32", "Murmur3Hash", "XxHash64", "ArrayContains", "ArrayPosition", "Size", "ArraySize",
      "CurrentDate", "CurrentTimestamp", "Now", "LocalTimestamp", "DateAdd", "DateSub", "DateDiff", "AddMonths", "MonthsBetween", "TruncDate",
      "TruncTimestamp", "Year", "Quarter", "Month", "DayOfMonth", "DayOfWeek", "WeekDay", "DayOfYear", "WeekOfYear", "YearOfWeek", "Hour",
      "Minute", "Second", "SecondWithFraction", "LastDay", "NextDay", "MakeDate", "MakeTimestamp", "MakeTimestampNTZ", "MakeDTInterval",
      "MakeInterval", "MakeYMInterval", "UnixTimestamp", "ToUnixTimestamp", "SecondsToTimestamp", "MillisToTimestamp", "MicrosToTimestamp",
      "UnixSeconds", "UnixMillis", "UnixMicros", "UnixDate", "DateFromUnixDate", "FromUTCTimestamp", "ToUTCTimestamp", "ParseToDate",
      "ParseToTimestamp", "GetTimestamp", "Extract", "DatePart", "DateAddInterval", "DateAddYMInterval", "TimestampAddInterval",
      "TimestampAddYMInterval", "TimestampAdd", "TimestampDiff", "SubtractDates", "SubtractTimestamps", "DatetimeSub", "ConvertTimezone",
      "PreciseTimestampConversion", "ExtractIntervalYears", "ExtractIntervalMonths", "ExtractIntervalDays", "ExtractIntervalHours",
      "ExtractIntervalMinutes", "ExtractIntervalSeconds", "ExtractANSIIntervalYears", "ExtractANSIIntervalMonths", "ExtractANSIIntervalDays",
      "ExtractANSIIntervalHours", "ExtractANSIIntervalMinutes", "ExtractANSIIntervalSeconds", "MultiplyInterval", "DivideInterval",
      "MultiplyDTInterval", "DivideDTInterval", "MultiplyYMInterval", "DivideYMInterval", "CheckOverflow", "MakeDecimal", "UnscaledValue",
      "Grouping", "GroupingID", "RowNumber", "Rank", "DenseRank", "PercentRank", "CumeDist", "NTile");

  /** Aggregates whose state is bounded (no collect_list/collect_set, no exact percentiles over every value). */
  static final Set<String> AGGREGATES = names(AGG,
      "Count", "Sum", "Min", "Max", "Average", "CountIf", "First", "Last", "AnyValue", "BoolAnd", "BoolOr", "MaxBy", "MinBy", "StddevSamp",
      "StddevPop", "VarianceSamp", "VariancePop", "Product", "Corr", "CovPopulation", "CovSample", "HyperLogLogPlusPlus", "Skewness", "Kurtosis",
      // PIVOT's: one value per pivot value, which the query lists as literals.
      "PivotFirst");

  /** Expressions whose value is at most as large as their inputs' (or a constant): SizeBounds takes the largest. */
  static final Set<String> BOUNDED_BY_INPUTS = names(E,
      "Alias", "If", "CaseWhen", "Coalesce", "Nvl", "Nvl2", "NullIf", "Greatest", "Least", "Substring", "Left", "Right", "StringTrim",
      "StringTrimLeft", "StringTrimRight", "StringTrimBoth", "Reverse", "SplitPart", "SubstringIndex", "Md5", "Sha1", "Sha2", "Chr", "SoundEx",
      "Unhex", "UnBase64", "ElementAt", "TryElementAt", "GetArrayItem", "GetStructField", "GetArrayStructFields", "GetMapValue", "ArrayCompact",
      "KnownNotNull", "KnownNullable", "KnownFloatingPointNormalized", "DayName", "MonthName", "Elt", "Explode", "PosExplode", "Inline",
      "GeneratorOuter", "SortOrder", "WindowExpression", "WindowSpecDefinition", "SpecifiedWindowFrame", "UnboundedPreceding$", "UnboundedFollowing$",
      "CurrentRow$", "Lag", "Lead", "NthValue", "FromUnixTime", "ScalarSubquery", "Exists", "ListQuery", "InSubquery", "LateralSubquery",
      "OuterReference", "AttributeReference", "Literal", "Cast", "UpCast",
      // What Spark replaces nullif (and LIKE's rewrite) with: a common subexpression bound once and referenced.
      "With", "CommonExpressionDef", "CommonExpressionRef", "TypedNullLiteral");

  /** Expressions SizeBounds bounds by a rule of their own (their size grows with an argument). */
  static final Set<String> GROWING = names(E,
      "Concat", "ConcatWs", "StringRepeat", "StringLPad", "StringRPad", "StringSpace", "StringReplace", "Overlay", "Lower", "Upper", "InitCap",
      "StringTranslate", "FormatString", "DateFormatClass", "Hex", "Base64", "CreateArray", "CreateNamedStruct", "ArrayRepeat", "Sequence",
      "StructsToJson", "Stack");

  static final String AGGREGATE_EXPRESSION = AGG + "AggregateExpression";

  /** Every expression class tenant logic may hold after analysis (the LIKE family is rewritten before this is asked). */
  static final Set<String> EXPRESSIONS = union(SCALAR, AGGREGATES, BOUNDED_BY_INPUTS, GROWING, Set.of(AGGREGATE_EXPRESSION));

  /** Expressions of a plan before analysis, besides those above (the function calls are judged by their class). */
  static final Set<String> PARSED_EXPRESSIONS = union(EXPRESSIONS, names(E, "Like", "ILike", "LikeAny", "LikeAll", "NotLikeAny", "NotLikeAll",
      "NamedArgumentExpression"), names(A,
      "UnresolvedAttribute", "UnresolvedFunction", "UnresolvedStar", "UnresolvedAlias", "UnresolvedExtractValue", "UnresolvedOrdinal",
      "UnresolvedWindowExpression", "UnresolvedStarWithColumns", "UnresolvedStarWithColumnsRenames", "UnresolvedGenerator",
      "UnresolvedHavingClauseAttribute", "UnresolvedDataFrameStar", "UnresolvedPlanId", "UnresolvedSeed"), names(E,
      "UnresolvedWindowExpression", "WindowSpecReference", "UnspecifiedFrame$", "NamePlaceholder$", "PipeExpression", "Cube", "Rollup",
      "GroupingSets"));

  private static Set<String> names(String prefix, String... simple) {
    Set<String> out = new HashSet<>();
    for (String s : simple) out.add(prefix + s);
    return Set.copyOf(out);
  }

  @SafeVarargs
  private static Set<String> union(Set<String>... sets) {
    Set<String> out = new HashSet<>();
    for (Set<String> s : sets) out.addAll(s);
    return Set.copyOf(out);
  }

  private LogicClasses() {}
}
