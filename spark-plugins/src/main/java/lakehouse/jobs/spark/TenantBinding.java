package lakehouse.jobs.spark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.TreeSet;

/**
 * What one Spark Connect session may touch: the tenant's namespaces and storage roots, its Kafka
 * grants and its limits, as the runner sent them (lakehouse.jobs.BindTenant) from the platform
 * config. Immutable; two bindings are the same when the runner sent the same bytes.
 */
final class TenantBinding {
  final String tenant;
  /** `catalog.namespace`, lower case. */
  final Set<String> readNamespaces;
  final Set<String> writeNamespaces;
  /** Normalised roots, each ending in `/` (Roots.of). */
  final List<String> readRoots;
  final List<String> writeRoots;
  final List<KafkaGrant> kafka;
  final Limits limits;
  private final byte[] wire;

  record KafkaGrant(List<String> bootstrapServers, List<String> topics, List<String> topicPrefixes) {
    KafkaGrant {
      bootstrapServers = List.copyOf(bootstrapServers);
      topics = List.copyOf(topics);
      topicPrefixes = List.copyOf(topicPrefixes);
    }
  }

  /** Limits; a zero or negative value sent is the default. */
  record Limits(
      long valueChars, long valueFactor, long collectionElements, long generatedRows, long rowGrowth, long rowFloor, long stepSeconds, long planNodes) {
    static final Limits DEFAULT = new Limits(1_000_000, 64, 100_000, 10_000_000, 1_000, 10_000_000, 3_600, 100_000);

    static Limits of(
        long valueChars, long valueFactor, long collectionElements, long generatedRows, long rowGrowth, long rowFloor, long stepSeconds, long planNodes) {
      return new Limits(
          or(valueChars, DEFAULT.valueChars), or(valueFactor, DEFAULT.valueFactor), or(collectionElements, DEFAULT.collectionElements),
          or(generatedRows, DEFAULT.generatedRows), or(rowGrowth, DEFAULT.rowGrowth), or(rowFloor, DEFAULT.rowFloor), or(stepSeconds, DEFAULT.stepSeconds),
          or(planNodes, DEFAULT.planNodes));
    }

    private static long or(long v, long d) {
      return v > 0 ? v : d;
    }
  }

  private TenantBinding(Builder b) {
    this.tenant = b.tenant;
    this.readNamespaces = lower(b.readNamespaces);
    this.writeNamespaces = lower(b.writeNamespaces);
    this.readRoots = Roots.of(b.readRoots);
    this.writeRoots = Roots.of(b.writeRoots);
    this.kafka = List.copyOf(b.kafka);
    this.limits = b.limits == null ? Limits.DEFAULT : b.limits;
    this.wire = b.wire.clone();
  }

  private static Set<String> lower(List<String> names) {
    Set<String> out = new TreeSet<>();
    for (String n : names) out.add(n.toLowerCase(Locale.ROOT));
    return Set.copyOf(out);
  }

  boolean sameAs(TenantBinding other) {
    return Arrays.equals(wire, other.wire);
  }

  /** `catalog.namespace` of an identity, lower case; null when there is no namespace of one level. */
  static String namespaceOf(String catalog, String[] namespace) {
    if (catalog == null || namespace == null || namespace.length != 1) return null;
    return (catalog + "." + namespace[0]).toLowerCase(Locale.ROOT);
  }

  boolean mayRead(String catalog, String[] namespace) {
    String ns = namespaceOf(catalog, namespace);
    return ns != null && readNamespaces.contains(ns);
  }

  boolean mayWrite(String catalog, String[] namespace) {
    String ns = namespaceOf(catalog, namespace);
    return ns != null && writeNamespaces.contains(ns);
  }

  /**
   * The tables (`catalog.namespace.table`, lower case) of the maintenance procedure this session
   * runs, set when the parser has judged its CALL: Iceberg's rewrite_data_files reads and writes
   * its file groups through a table it caches under a random key (catalog default_rewrite_catalog),
   * allowed only when that cached table is one of these.
   */
  private volatile Set<String> maintained = Set.of();

  void maintaining(Set<String> tables) {
    maintained = Set.copyOf(tables);
  }

  boolean isMaintained(String qualifiedName) {
    return qualifiedName != null && maintained.contains(qualifiedName.toLowerCase(Locale.ROOT));
  }

  boolean mayReadPath(String location) {
    return Roots.inside(location, readRoots);
  }

  boolean mayWritePath(String location) {
    return Roots.inside(location, writeRoots);
  }

  static final class Builder {
    String tenant = "";
    final List<String> readNamespaces = new ArrayList<>();
    final List<String> writeNamespaces = new ArrayList<>();
    final List<String> readRoots = new ArrayList<>();
    final List<String> writeRoots = new ArrayList<>();
    final List<KafkaGrant> kafka = new ArrayList<>();
    Limits limits;
    /** The limits as sent, before defaults (what the wire vectors pin). */
    long[] limitsSent = new long[0];
    private final byte[] wire;

    Builder(byte[] wire) {
      this.wire = wire;
    }

    TenantBinding build() {
      // A platform config without catalogs gives no namespaces (a tenant writing files only).
      if (tenant.isEmpty() || writeRoots.isEmpty()) throw new IllegalArgumentException("lakehouse.jobs.BindTenant without a tenant or write roots");
      return new TenantBinding(this);
    }
  }
}
