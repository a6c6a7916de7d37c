package lakehouse.jobs.spark;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.analysis.ResolvedIdentifier;
import org.apache.spark.sql.catalyst.analysis.ResolvedNamespace;
import org.apache.spark.sql.catalyst.analysis.ResolvedProcedure;
import org.apache.spark.sql.catalyst.analysis.ResolvedTable;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedArgumentExpression;
import org.apache.spark.sql.catalyst.expressions.SubqueryExpression;
import org.apache.spark.sql.catalyst.plans.logical.Call;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.TableSpec;
import org.apache.spark.sql.catalyst.plans.logical.TableSpecBase;
import org.apache.spark.sql.catalyst.streaming.StreamingRelationV2;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connector.catalog.CatalogPlugin;
import org.apache.spark.sql.connector.catalog.Identifier;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.jdbc.JDBCRelation;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.apache.spark.sql.execution.datasources.v2.FileTable;
import org.apache.spark.sql.execution.datasources.v2.StreamingDataSourceV2Relation;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * The tenant boundary: a Catalyst check rule (TenantPolicyExtensions) that judges every plan
 * analysed in a bound session, the runner's template plans and the internal queries Delta and
 * Iceberg run alike, by identity: every relation read is one of the tenant's (or granted) tables
 * or files under its read roots, every write target (V2 writes, row-level rewrites, CREATE/REPLACE,
 * DROP/ALTER, Delta's commands, Iceberg's procedures with their table arguments, file writes,
 * streaming sinks) one of its own tables or paths. A plan node of a class it does not know is
 * refused: a bug of ours fails closed, it cannot escape the tenant. The classes and their roles
 * are listed in PlanClasses; docs/security-policy.md says why each is there.
 */
final class TenantBoundary extends AbstractFunction1<LogicalPlan, BoxedUnit> {
  private final SparkSession session;

  TenantBoundary(org.apache.spark.sql.SparkSession session) {
    this.session = (SparkSession) session;
  }

  @Override
  public BoxedUnit apply(LogicalPlan plan) {
    TenantBinding binding = Bindings.of(session);
    if (binding == null) {
      if (PolicySettings.requireBinding(session) && session != SparkSession.getDefaultSession().getOrElse(() -> null))
        throw TenantPolicyException.refused(
            "this server judges every plan against a tenant, and this session is not bound to one (the runner binds its sessions before any step)",
            List.of());
      return BoxedUnit.UNIT;
    }
    Walk walk = new Walk(session, binding);
    walk.plan(plan, Access.READ);
    PolicySettings.verdict(session, binding, walk.problems, List.of(), "tenant boundary", walk.details, plan);
    return BoxedUnit.UNIT;
  }

  enum Access {
    READ,
    WRITE
  }

  /** One walk over a plan: its nodes, their expressions' subqueries, the identities they carry. */
  static final class Walk {
    final SparkSession session;
    final TenantBinding binding;
    final Set<String> problems = new LinkedHashSet<>();
    /** Nodes already judged (a CTE definition referenced twice, a plan shared by two fields). */
    private final Map<Object, Access> seen = new IdentityHashMap<>();
    /** The nearest view being expanded: what a refusal names instead of the view's tables. */
    private String view;

    Walk(SparkSession session, TenantBinding binding) {
      this.session = session;
      this.binding = binding;
    }

    void problem(String p) {
      problems.add(view == null ? p : "view " + view + " reads what the tenant may not read");
    }

    /** What only the server's log may show (report mode): the locations and names behind a problem. */
    final List<String> details = new ArrayList<>();

    private void detail(String d) {
      if (details.size() < 50) details.add(d);
    }

    void plan(LogicalPlan p, Access access) {
      if (p == null) return;
      Access before = seen.get(p);
      if (before == access || before == Access.WRITE) return;
      seen.put(p, access);
      for (Expression e : Scala.list(p.expressions())) expression(e);
      String cls = p.getClass().getName();
      PlanClasses.Role role = PlanClasses.role(cls);
      if (role == null) {
        problem("plan node " + p.nodeName() + " (" + cls + ") is not allowed");
        return;
      }
      switch (role) {
        case TRANSFORM -> children(p, access);
        case VIEW -> {
          String outer = view;
          if (view == null) view = viewName(p);
          children(p, access);
          view = outer;
        }
        case LEAF -> {}
        case RELATION -> relation(p, access);
        case READ_COMMAND -> fields(p, Access.READ);
        case WRITE_COMMAND -> fields(p, Access.WRITE);
        case CALL -> call((Call) p);
        case COMMAND_RESULT -> value("commandLogicalPlan", fieldOf(p, "commandLogicalPlan"), access);
      }
    }

    private void children(LogicalPlan p, Access access) {
      for (LogicalPlan c : Scala.list(p.children())) plan(c, access);
    }

    /** A subquery's plan is a plan like any other; no expression runs reflection in a bound session. */
    void expression(Expression e) {
      if (e == null) return;
      if (e instanceof SubqueryExpression s) plan(s.plan(), Access.READ);
      if (PlanClasses.NEVER_IN_BOUND_SESSION.contains(e.getClass().getName()))
        problem("expression " + e.nodeName() + " (" + e.getClass().getName() + ") is not allowed");
      for (Expression c : Scala.list(e.children())) expression(c);
    }

    /**
     * A command's constructor arguments: its query plans are read, everything else it names (its
     * target table, catalog table, path, Delta log, location) is written (or read, for a command
     * that only describes). Fields holding a query by these names are read in any case.
     */
    private void fields(LogicalPlan p, Access access) {
      List<String> names = Scala.names(p);
      List<Object> values = Scala.elements(p);
      for (int i = 0; i < values.size(); i++) {
        String name = i < names.size() ? names.get(i) : "";
        String cls = p.getClass().getName();
        boolean target = (name.equals("child") && PlanClasses.TARGET_CHILD.contains(cls))
            || (name.equals("sourceTable") && PlanClasses.TARGET_SOURCE_TABLE.contains(cls));
        Access a = PlanClasses.QUERY_FIELDS.contains(name) && !target ? Access.READ : access;
        if (PROPERTY_FIELDS.contains(name) && SETS_PROPERTIES.contains(cls)) propertyKeys(values.get(i));
        // A streaming query keeps its progress here: the tenant's own storage.
        if (name.equals("resolvedCheckpointLocation") && values.get(i) instanceof String location) path(location, Access.WRITE);
        else value(name, values.get(i), a);
      }
    }

    void value(String name, Object v, Access access) {
      if (v == null || v instanceof Expression || v instanceof String || v instanceof Number || v instanceof Boolean) return;
      if (v instanceof LogicalPlan lp) plan(lp, access);
      else if (v instanceof scala.Option<?> o) value(name, Scala.orNull(o), access);
      else if (v instanceof scala.Tuple2<?, ?> t && t._1() instanceof CatalogPlugin c && t._2() instanceof Identifier id)
        identity(c.name(), id.namespace(), id.name(), access);
      else if (v instanceof scala.collection.Map<?, ?> m) options(Scala.map(m), access);
      else if (v instanceof scala.collection.Iterable<?> it) for (Object x : Scala.list(it)) value(name, x, access);
      else if (v instanceof CatalogTable ct) catalogTable(ct, access);
      else if (v instanceof TableIdentifier ti) tableIdentifier(ti, access);
      else if (v instanceof Path path) path(path.toString(), access);
      else if (v instanceof FileIndex fi) fileIndex(fi, access);
      else if (v instanceof TableSpecBase spec) tableSpec(spec, access);
      else if (v instanceof CaseInsensitiveStringMap m) options(m, access);
      else deltaValue(v, access);
    }

    /** A file source's `path`/`paths` option, or a table's `location` property. */
    private void options(Map<?, ?> m, Access access) {
      for (var e : m.entrySet()) {
        String k = String.valueOf(e.getKey()).toLowerCase(Locale.ROOT);
        // A rewrite group's write names its group (the judged cached table) as its path.
        if (k.equals("path") && e.getValue() != null && rewriteGroups.contains(String.valueOf(e.getValue()))) continue;
        if ((k.equals("path") || k.equals("location")) && e.getValue() != null) path(String.valueOf(e.getValue()), access);
        if (k.equals("paths") && e.getValue() != null) problem("a \"paths\" option is not allowed in a bound session");
      }
    }

    /** The commands that set or unset a table's properties, and the fields that hold the keys. */
    private static final Set<String> SETS_PROPERTIES = Set.of(
        "org.apache.spark.sql.catalyst.plans.logical.SetTableProperties",
        "org.apache.spark.sql.catalyst.plans.logical.UnsetTableProperties",
        "org.apache.spark.sql.delta.commands.AlterTableSetPropertiesDeltaCommand");
    private static final Set<String> PROPERTY_FIELDS = Set.of("properties", "propertyKeys", "configuration");

    /** A table's properties (a map's keys, or a list of keys to unset): each one TableProperties allows. */
    private void propertyKeys(Object v) {
      Iterable<?> keys;
      if (v instanceof scala.collection.Map<?, ?> m) keys = Scala.map(m).keySet();
      else if (v instanceof Map<?, ?> m) keys = m.keySet();
      else if (v instanceof scala.collection.Iterable<?> it) keys = Scala.list(it);
      else {
        problem("table properties of an unknown shape (" + (v == null ? "null" : v.getClass().getName()) + ") are not allowed");
        return;
      }
      for (Object k : keys) {
        String key = String.valueOf(k);
        if (!TableProperties.allowed(key)) problem("table property " + key + " is not one a tenant's table may have (docs/table-shape.md)");
      }
    }

    private void tableSpec(TableSpecBase spec, Access access) {
      propertyKeys(spec.properties());
      // A resolved create's writer options reach its catalog as `option.*` properties.
      if (spec instanceof TableSpec resolved) propertyKeys(resolved.options());
      String location = Scala.orNull(spec.location());
      if (location == null) location = spec.properties().get("location").getOrElse(() -> null);
      if (location == null) problem("a table is created without a location under the tenant's storage roots");
      else path(location, access);
    }

    /** Delta's own classes, by name: the plugin must not need Delta to load. */
    private void deltaValue(Object v, Access access) {
      String cls = v.getClass().getName();
      if (cls.equals("org.apache.spark.sql.delta.DeltaLog")) {
        Object p = call(v, "dataPath");
        if (p instanceof Path path) path(path.toString(), access);
      } else if (cls.equals("org.apache.spark.sql.delta.catalog.DeltaTableV2")) {
        Object ct = call(v, "catalogTable");
        if (ct instanceof scala.Option<?> o && o.isDefined()) catalogTable((CatalogTable) o.get(), access);
        else if (call(v, "path") instanceof Path path) path(path.toString(), access);
      }
    }

    /** A field a Scala class keeps private (a batch KafkaRelation's options): null when it has none. */
    private static Object privateField(Object target, String name) {
      try {
        var f = target.getClass().getDeclaredField(name);
        f.setAccessible(true);
        return f.get(target);
      } catch (ReflectiveOperationException | RuntimeException e) {
        return null;
      }
    }

    private static Object call(Object target, String method) {
      try {
        Method m = target.getClass().getMethod(method);
        return m.invoke(target);
      } catch (ReflectiveOperationException | RuntimeException e) {
        return null;
      }
    }

    /** The location of an Iceberg table (or of the table behind a metadata table); null for anything else. */
    private static Object icebergLocation(Object sparkTable) {
      if (!sparkTable.getClass().getName().equals("org.apache.iceberg.spark.source.SparkTable")) return null;
      Object t = call(sparkTable, "table");
      // A metadata table's location is its base table's.
      return t == null ? null : call(t, "location");
    }

    private static boolean isIcebergMetadataTable(Object sparkTable) {
      if (!sparkTable.getClass().getName().equals("org.apache.iceberg.spark.source.SparkTable")) return false;
      Object t = call(sparkTable, "table");
      for (Class<?> c = t == null ? null : t.getClass(); c != null; c = c.getSuperclass())
        if (c.getName().equals("org.apache.iceberg.BaseMetadataTable")) return true;
      return false;
    }

    private static boolean isIcebergChangelog(Object sparkTable) {
      return sparkTable.getClass().getName().equals("org.apache.iceberg.spark.source.SparkChangelogTable");
    }

    private static Map<String, String> stringMap(scala.collection.Map<?, ?> m) {
      Map<String, String> out = new java.util.HashMap<>();
      for (var e : Scala.map(m).entrySet()) out.put(String.valueOf(e.getKey()), String.valueOf(e.getValue()));
      return out;
    }

    private static Object fieldOf(LogicalPlan p, String field) {
      return call(p, field);
    }

    private static String viewName(LogicalPlan p) {
      Object desc = call(p, "desc");
      return desc instanceof CatalogTable ct ? ct.identifier().unquotedString() : "(a view)";
    }

    // ---- relations ----

    void relation(LogicalPlan p, Access access) {
      if (p instanceof DataSourceV2Relation r) v2Relation(r, access);
      else if (p instanceof LogicalRelation r) logicalRelation(r, access);
      else if (p instanceof StreamingRelationV2 r) streamingRelation(r, access);
      else if (p.getClass().getName().equals("org.apache.spark.sql.execution.datasources.v2.StreamingDataSourceV2ScanRelation")
          && call(p, "relation") instanceof DataSourceV2Relation r) v2Relation(r, access);
      // Spark 4.1's micro-batch read: a StreamingDataSourceV2Relation inside the scan relation.
      else if (p.getClass().getName().equals("org.apache.spark.sql.execution.datasources.v2.StreamingDataSourceV2ScanRelation")
          && call(p, "relation") instanceof StreamingDataSourceV2Relation r) microBatch(r, access);
      else if (p instanceof ResolvedTable r) identity(r.catalog().name(), r.identifier().namespace(), r.identifier().name(), access);
      else if (p instanceof ResolvedIdentifier r) identity(r.catalog().name(), r.identifier().namespace(), r.identifier().name(), access);
      else if (p instanceof ResolvedNamespace r) namespace(r.catalog().name(), Scala.list(r.namespace()).toArray(String[]::new), access);
      else problem("relation " + p.nodeName() + " is not allowed");
    }

    private void v2Relation(DataSourceV2Relation r, Access access) {
      CatalogPlugin catalog = Scala.orNull(r.catalog());
      Identifier id = Scala.orNull(r.identifier());
      if (catalog != null && id != null && catalog.name().equals(REWRITE_CATALOG) && id.namespace().length == 0) {
        rewriteGroup(r, id.name(), access);
        return;
      }
      if (catalog != null && id != null) {
        String[] ns = id.namespace();
        // An Iceberg metadata table (`<table>.refs`, `.snapshots` …) of one of the tenant's tables: read only.
        // Its changelog (`<table>.changes`, what an incremental gold-publish reads) is the same: the table's own rows, read only.
        if (ns.length == 2 && access == Access.READ && (isIcebergMetadataTable(r.table()) || isIcebergChangelog(r.table())))
          identity(catalog.name(), new String[] {ns[0]}, ns[1] + "." + id.name(), access);
        else identity(catalog.name(), ns, id.name(), access);
        // Its files by its location, as for a session catalog table (an Iceberg table may also reference
        // files elsewhere, which only iceberg-zero-copy-append adopts, from roots the tenant may read).
        String location = r.table().properties() == null ? null : r.table().properties().get("location");
        if (location != null) path(location, access);
        return;
      }
      String table = r.table().getClass().getName();
      if (table.equals("org.apache.spark.sql.kafka010.KafkaSourceProvider$KafkaTable") && access == Access.READ) kafka(r.options());
      else if (r.table() instanceof FileTable ft) fileIndex(ft.fileIndex(), access);
      else if (access == Access.READ && icebergLocation(r.table()) instanceof String location) {
        // An Iceberg table loaded by its metadata file (Iceberg's procedures read their table's
        // metadata tables so): judged by the table's location, which must lie under the read roots.
        detail("READ iceberg table by path " + r.table().name());
        path(location, access);
      } else {
        detail(access + " table without a catalog " + r.table().name());
        problem("a " + (access == Access.READ ? "read of" : "write to") + " a table without a catalog is not allowed");
      }
    }

    /** Iceberg's catalog of the tables its rewrite_data_files caches (IcebergSource's rewrite catalog). */
    static final String REWRITE_CATALOG = "default_rewrite_catalog";

    /**
     * A file group of Iceberg's rewrite_data_files, read and written through the table the action
     * cached under a random key: allowed only when the key is in Iceberg's table cache, the relation's
     * table is that cached table, the table is the one the session's judged CALL maintains (by its
     * catalog name) and its location lies under the tenant's write roots.
     */
    private void rewriteGroup(DataSourceV2Relation r, String key, Access access) {
      Object cached = null;
      try {
        Class<?> cache = Class.forName("org.apache.iceberg.spark.SparkTableCache", true, r.table().getClass().getClassLoader());
        Object instance = cache.getMethod("get").invoke(null);
        cached = cache.getMethod("get", String.class).invoke(instance, key);
      } catch (ReflectiveOperationException | RuntimeException | LinkageError e) {
        cached = null;
      }
      // Iceberg 1.11 reads and writes a group through a SparkRewriteTable of the group's id.
      String cls = r.table().getClass().getName();
      boolean group = cls.equals("org.apache.iceberg.spark.source.SparkRewriteTable") && key.equals(privateField(r.table(), "groupId"));
      Object table = group || cls.equals("org.apache.iceberg.spark.source.SparkTable") ? call(r.table(), "table") : null;
      Object name = table == null ? null : call(table, "name");
      Object location = table == null ? null : call(table, "location");
      if (cached == null || table == null || !sameTable(cached, table) || !(name instanceof String n) || !binding.isMaintained(n)
          || !(location instanceof String loc)) {
        detail(access + " rewrite group " + key + " of " + name);
        problem("a " + (access == Access.READ ? "read of" : "write to") + " a table outside the tenant's namespaces");
        return;
      }
      path(loc, Access.WRITE);
      rewriteGroups.add(key);
    }

    /** The rewrite groups judged in this plan: their key is also the path option of their write. */
    private final Set<String> rewriteGroups = new LinkedHashSet<>();

    /** The cached table and the relation's: the same object, or the same table (UUID and location). */
    private static boolean sameTable(Object cached, Object table) {
      if (cached == table) return true;
      Object a = call(cached, "uuid"), b = call(table, "uuid");
      Object la = call(cached, "location"), lb = call(table, "location");
      return a != null && a.equals(b) && la != null && la.equals(lb);
    }

    private void microBatch(StreamingDataSourceV2Relation r, Access access) {
      CatalogPlugin catalog = Scala.orNull(r.catalog());
      Identifier id = Scala.orNull(r.identifier());
      if (catalog != null && id != null) identity(catalog.name(), id.namespace(), id.name(), access);
      else if (r.table().getClass().getName().equals("org.apache.spark.sql.kafka010.KafkaSourceProvider$KafkaTable") && access == Access.READ) kafka(r.options());
      else problem("a streaming read of a table without a catalog is not allowed");
    }

    private void logicalRelation(LogicalRelation r, Access access) {
      CatalogTable ct = Scala.orNull(r.catalogTable());
      if (ct != null) {
        catalogTable(ct, access);
        return;
      }
      if (r.relation() instanceof HadoopFsRelation fs) fileIndex(fs.location(), access);
      else if (r.relation() instanceof JDBCRelation && access == Access.READ) jdbcRelations++;
      else if (r.relation().getClass().getName().equals("org.apache.spark.sql.kafka010.KafkaRelation") && access == Access.READ
          && privateField(r.relation(), "sourceOptions") instanceof scala.collection.Map<?, ?> options)
        kafka(new CaseInsensitiveStringMap(stringMap(options)));
      else problem("relation " + r.relation().getClass().getSimpleName() + " is not allowed");
    }

    /** JDBC relations seen: the strict judge allows as many as the step declared. */
    int jdbcRelations;

    private void streamingRelation(StreamingRelationV2 r, Access access) {
      CatalogPlugin catalog = Scala.orNull(r.catalog());
      Identifier id = Scala.orNull(r.identifier());
      if (catalog != null && id != null) identity(catalog.name(), id.namespace(), id.name(), access);
      else if (r.sourceName().equals("kafka") && access == Access.READ) kafka(r.extraOptions());
      else problem("a streaming read of " + r.sourceName() + " is not allowed");
    }

    private void fileIndex(FileIndex fi, Access access) {
      int outside = 0;
      for (Path p : Scala.list(fi.rootPaths()))
        if (!(access == Access.READ ? binding.mayReadPath(p.toString()) : binding.mayWritePath(p.toString()))) {
          outside++;
          detail(access + " " + p + " (" + fi.getClass().getSimpleName() + ")");
        }
      // Never which: a glob expands to other tenants' names.
      if (outside > 0) problem((access == Access.READ ? "reads " : "writes ") + outside + " file location(s) outside the tenant's storage roots");
    }

    void path(String location, Access access) {
      boolean ok = access == Access.READ ? binding.mayReadPath(location) : binding.mayWritePath(location);
      if (!ok) detail(access + " " + location);
      if (!ok) problem((access == Access.READ ? "reads" : "writes") + " a location outside the tenant's storage roots");
    }

    /**
     * A table of the session catalog by its identity, and its files by its location: a table of the
     * tenant's namespace whose files lie elsewhere (created there by hand, or at another tenant's
     * path) reads what is not the tenant's.
     */
    private void catalogTable(CatalogTable ct, Access access) {
      tableIdentifier(ct.identifier(), access);
      if (ct.storage().locationUri().isDefined()) path(ct.storage().locationUri().get().toString(), access);
    }

    private void tableIdentifier(TableIdentifier ti, Access access) {
      String catalog = ti.catalog().isDefined() ? ti.catalog().get() : "spark_catalog";
      String db = Scala.orNull(ti.database());
      if (db == null) problem("table " + ti.table() + " has no namespace");
      else identity(catalog, new String[] {db}, ti.table(), access);
    }

    /**
     * A table by its identity. A refusal does not name a table outside the tenant: here it can come
     * from what a view or a table format's own code resolved, which the tenant did not write (the
     * server's log has it in report mode; the judge of tenant logic names what the tenant wrote).
     */
    void identity(String catalog, String[] namespace, String name, Access access) {
      boolean ok = access == Access.READ ? binding.mayRead(catalog, namespace) : binding.mayWrite(catalog, namespace);
      if (ok) return;
      detail(access + " table " + catalog + "." + String.join(".", namespace) + "." + name);
      problem(access == Access.READ ? "a table outside the tenant's namespaces" : "a write to a table outside the tenant's own namespaces");
    }

    private void namespace(String catalog, String[] namespace, Access access) {
      boolean ok = access == Access.READ ? binding.mayRead(catalog, namespace) : binding.mayWrite(catalog, namespace);
      if (!ok) detail(access + " namespace " + catalog + "." + String.join(".", namespace));
      if (!ok) problem("a namespace that is not one of the tenant's");
    }

    /** A Kafka read: a granted cluster's servers, and granted topics (or a pattern within a granted prefix). */
    private void kafka(CaseInsensitiveStringMap o) {
      String servers = o.get("kafka.bootstrap.servers");
      List<String> asked = servers == null ? List.of() : List.of(servers.split(","));
      TenantBinding.KafkaGrant grant = null;
      for (TenantBinding.KafkaGrant g : binding.kafka)
        if (new LinkedHashSet<>(g.bootstrapServers()).equals(new LinkedHashSet<>(asked.stream().map(String::trim).toList()))) grant = g;
      if (grant == null) {
        problem("a Kafka read of a cluster the tenant has no grant on");
        return;
      }
      if (o.containsKey("assign")) problem("a Kafka read by assign is not allowed (subscribe to granted topics)");
      String subscribe = o.get("subscribe");
      String pattern = o.get("subscribepattern");
      if ((subscribe == null) == (pattern == null)) {
        problem("a Kafka read must subscribe to topics or to one pattern");
        return;
      }
      if (subscribe != null) {
        for (String t : subscribe.split(",")) if (!granted(grant, t.trim(), false)) problem("Kafka topic " + t.trim() + " is not granted to the tenant");
      } else if (!granted(grant, literalPrefix(pattern), !isLiteral(pattern))) problem("the Kafka topic pattern can match topics not granted to the tenant");
    }

    private static boolean granted(TenantBinding.KafkaGrant g, String topic, boolean prefixOnly) {
      if (topic == null) return false;
      if (!prefixOnly && g.topics().contains(topic)) return true;
      for (String p : g.topicPrefixes()) if (topic.startsWith(p)) return true;
      return false;
    }

    /** The literal run a topic regex starts with (`\.` and `\-` unescaped, as the runner writes them), or null. */
    static String literalPrefix(String regex) {
      StringBuilder b = new StringBuilder();
      for (int i = 0; i < regex.length(); i++) {
        char c = regex.charAt(i);
        if (c == '\\' && i + 1 < regex.length() && (regex.charAt(i + 1) == '.' || regex.charAt(i + 1) == '-')) b.append(regex.charAt(++i));
        else if (Character.isLetterOrDigit(c) || c == '_') b.append(c);
        else break;
      }
      return b.toString();
    }

    private static boolean isLiteral(String regex) {
      return literalPrefixLength(regex) == regex.length();
    }

    private static int literalPrefixLength(String regex) {
      int i = 0;
      while (i < regex.length()) {
        char c = regex.charAt(i);
        if (c == '\\' && i + 1 < regex.length() && (regex.charAt(i + 1) == '.' || regex.charAt(i + 1) == '-')) i += 2;
        else if (Character.isLetterOrDigit(c) || c == '_') i++;
        else break;
      }
      return i;
    }

    // ---- procedures ----

    /**
     * CALL <catalog>.system.<procedure>(table => '<namespace>.<table>', …): a maintenance
     * procedure of an allowed name, whose table argument is one of the tenant's own tables and
     * whose location argument lies under its roots.
     */
    private void call(Call c) {
      if (!(c.procedure() instanceof ResolvedProcedure rp)) {
        problem("a procedure call the server did not resolve");
        return;
      }
      call(rp.catalog().name(), String.join(".", rp.ident().namespace()) + "." + rp.ident().name(), Scala.list(c.args()));
    }

    /**
     * A procedure call as parsed (TenantParser): Spark runs a procedure while it analyses the CALL
     * (InvokeProcedures, a resolution rule), before any check rule sees the plan, so the parser
     * judges it. `nameParts` are the CALL's name; without a catalog it is the current catalog.
     */
    void parsedCall(List<String> nameParts, List<Expression> args) {
      if (nameParts.size() < 2) {
        problem("a procedure call without a namespace");
        return;
      }
      String catalog =
          nameParts.size() >= 3 ? nameParts.get(0) : session.sessionState().catalogManager().currentCatalog().name();
      List<String> rest = nameParts.size() >= 3 ? nameParts.subList(1, nameParts.size()) : nameParts;
      call(catalog, String.join(".", rest), args);
    }

    private void call(String catalog, String name, List<Expression> args) {
      if (!PlanClasses.PROCEDURES.contains(name.toLowerCase(Locale.ROOT))) {
        problem("procedure " + name + " is not allowed");
        return;
      }
      boolean table = false;
      for (int i = 0; i < args.size(); i++) {
        Expression a = args.get(i);
        String key = a instanceof NamedArgumentExpression n ? n.key().toLowerCase(Locale.ROOT) : (i == 0 ? "table" : "");
        Expression value = a instanceof NamedArgumentExpression n ? n.value() : a;
        if (key.equals("table")) {
          table = true;
          String text = value instanceof Literal l && l.value() != null ? l.value().toString() : null;
          if (text == null) problem("procedure " + name + ": the table argument must be a literal");
          else procedureTable(catalog, text);
        } else if (key.equals("location")) {
          String text = value instanceof Literal l && l.value() != null ? l.value().toString() : null;
          if (text == null) problem("procedure " + name + ": the location argument must be a literal");
          else path(text, Access.WRITE);
        }
      }
      if (!table) problem("procedure " + name + " without a table argument");
    }

    private void procedureTable(String catalog, String text) {
      List<String> parts;
      try {
        parts = Scala.list(session.sessionState().sqlParser().parseMultipartIdentifier(text));
      } catch (Exception e) {
        problem("a procedure's table argument is not a table name");
        return;
      }
      if (parts.size() >= 3 && session.sessionState().catalogManager().isCatalogRegistered(parts.get(0))) {
        catalog = parts.get(0);
        parts = parts.subList(1, parts.size());
      }
      if (parts.size() < 2) {
        problem("a procedure's table argument has no namespace");
        return;
      }
      String[] ns = parts.subList(0, parts.size() - 1).toArray(String[]::new);
      identity(catalog, ns, parts.get(parts.size() - 1), Access.WRITE);
      procedureTables.add((catalog + "." + String.join(".", ns) + "." + parts.get(parts.size() - 1)).toLowerCase(Locale.ROOT));
    }

    /** The tables the procedures of a parsed statement maintain (`catalog.namespace.table`, lower case). */
    final Set<String> procedureTables = new LinkedHashSet<>();
  }

  /** For the strict judge: a fresh walk's problems over one plan. */
  static List<String> problems(SparkSession session, TenantBinding binding, LogicalPlan plan) {
    Walk w = new Walk(session, binding);
    w.plan(plan, Access.READ);
    return new ArrayList<>(w.problems);
  }
}
