import { ConfigError, type ConfigIssue, InputMissingError, type LakehouseError, UnavailableError } from '../../core/errors.js';
import { Secret, registerSecretValue } from '../../core/secrets.js';
import { SparkError } from '../../spark/errors.js';
import { col } from '../../spark/plan/expressions.js';
import { Query } from '../../spark/plan/query.js';
import type { OptionValue } from '../../spark/plan/relations.js';
import type { KafkaClusterRef, Step } from '../template.js';
import { queryStep } from '../steps.js';

/**
 * What a Kafka source may read and how Spark connects to it. The connection (brokers, security,
 * credentials) is the platform's alone; a tenant's config only names topics, and those must lie
 * inside the tenant's grant (`kafka.clusters.<name>.tenants.<id>`): a topic outside it is a
 * config error (78) before anything reaches Spark.
 */

/** Topics a job reads: a list of names, or one glob (`acme.orders.*`) over topic names. */
export type TopicSelection = { readonly topics: readonly string[] } | { readonly pattern: string };

/** A topic glob: topic name characters and `*` (any run of topic name characters). */
export const TOPIC_GLOB = /^[A-Za-z0-9._*-]{1,249}$/;

/** What `*` matches: any run of topic name characters. */
const TOPIC_RUN = '[A-Za-z0-9._-]*';

/**
 * The Java regex Spark's `subscribePattern` gets for a glob. Built here, never taken from config:
 * `*` can only match topic name characters, and Kafka matches the whole name, so every topic it
 * matches starts with the glob's literal prefix (what the grant is checked against).
 *
 * Spark matches it with java.util.regex on the shared server's driver, against every topic of the
 * cluster, in a thread that no cancel interrupts. Consecutive `[…]*` runs backtrack in polynomial
 * time of a degree the glob chooses (`acme.*a*a*…*Z`: hours per topic), so the regex is built to
 * match in time linear in the topic's length by construction: each middle literal is found at its
 * first occurrence inside an atomic group (`(?>[…]*?lit)`), which is never re-entered, and only
 * the last run backtracks, over the topic's length once. The leftmost occurrence of each middle
 * literal is always a right choice for a glob, so the meaning is the glob's (proved on random globs
 * in the unit tests). Runs of `*` are one `*`.
 */
export function globToJavaRegex(glob: string): string {
  const literal = (s: string) => s.replace(/[.-]/g, (c) => `\\${c}`);
  const [first, ...rest] = glob.split(/\*+/);
  if (!rest.length) return literal(first!);
  const last = rest.pop()!;
  return `${literal(first!)}${rest.map((s) => `(?>${TOPIC_RUN}?${literal(s)})`).join('')}${TOPIC_RUN}${literal(last)}`;
}

/** The problems of a selection under a grant, with the config paths they belong to (none: granted). */
export function grantIssues(selection: TopicSelection, grant: KafkaClusterRef['grant'], cluster: string): ConfigIssue[] {
  const granted = (topic: string) => grant.topics.includes(topic) || grant.prefixes.some((p) => topic.startsWith(p));
  const what = `the topics granted to this tenant on Kafka cluster "${cluster}"`;
  if ('topics' in selection)
    return selection.topics.flatMap((t, i) =>
      granted(t) ? [] : [{ path: `source.topics[${i}]`, message: `"${t}" is not among ${what} (ask the platform team for a grant)` }],
    );
  // A glob is granted when everything it can match is: its literal prefix lies under a granted prefix.
  const literal = selection.pattern.split('*')[0]!;
  const ok = selection.pattern.includes('*') ? grant.prefixes.some((p) => literal.startsWith(p)) : granted(selection.pattern);
  return ok
    ? []
    : [
        {
          path: 'source.topic-pattern',
          message: `"${selection.pattern}" can match topics outside ${what}: it must start with a granted prefix (${grant.prefixes.join(', ') || 'none granted'})`,
        },
      ];
}

/** Refuse a selection outside the grant (78, every offending path named). */
export function checkGrant(selection: TopicSelection, cluster: KafkaClusterRef): void {
  const issues = grantIssues(selection, cluster.grant, cluster.name);
  if (issues.length) throw new ConfigError(issues);
}

/** A start later than any record (the year 3000), so that a topic's check reads none of its records. */
const AFTER_EVERY_RECORD = '32503680000000';

/**
 * Steps that check the topics exist before anything is created: each listed topic with a batch read
 * that starts after its last record (Spark asks the cluster for the topic's partitions and reads
 * nothing); a topic the cluster lacks is 66 naming it at its path. A glob knows its topics only
 * through their records, so it is checked by reading at most one record of what it matches: none is
 * 66 too (a glob matching only topics that hold no record, such as retention emptied, included).
 */
export function topicChecks(selection: TopicSelection, cluster: KafkaClusterRef, connection: Record<string, OptionValue>): Step[] {
  const where = `Kafka cluster "${cluster.name}"`;
  if ('topics' in selection)
    return selection.topics.map((topic, i) =>
      queryStep({
        id: `check-topic-${i}`,
        columns: ['topic'],
        title: `Check that topic ${topic} exists on ${where} (no record is read)`,
        query: Query.read('kafka', {
          options: {
            ...connection,
            subscribe: topic,
            startingTimestamp: AFTER_EVERY_RECORD,
            startingOffsetsByTimestampStrategy: 'latest',
            endingOffsets: 'latest',
          },
        })
          .select(col('topic'))
          .limit(1),
        interpret: () => ({}),
        explainFailure: (e: LakehouseError) =>
          unknownTopic(e)
            ? new InputMissingError(`source.topics[${i}]: topic "${topic}" does not exist on ${where}; nothing was created`, { cause: e })
            : unreachable(e, cluster),
      }),
    );
  return [
    queryStep({
      id: 'check-topics',
      columns: ['topic'],
      title: `Check that ${selection.pattern} matches a topic with records on ${where} (reads at most one record)`,
      query: Query.read('kafka', { options: { ...connection, ...subscription(selection), startingOffsets: 'earliest', endingOffsets: 'latest' } })
        .select(col('topic'))
        .limit(1),
      explainFailure: (e: LakehouseError) => unreachable(e, cluster),
      interpret: (rows) =>
        rows.length
          ? {}
          : {
              fail: new InputMissingError(`source.topic-pattern: "${selection.pattern}" matches no topic that holds a record on ${where}; nothing was created`),
            },
    }),
  ];
}

/** Kafka's answer for a topic the cluster does not have, as Spark passes it on. */
function unknownTopic(e: LakehouseError): boolean {
  const text = e instanceof SparkError ? `${e.serverMessage} ${e.message}` : e.message;
  return /UnknownTopicOrPartition/.test(text);
}

/** Kafka did not answer (src/spark/errors.ts' KAFKA_UNAVAILABLE): 69 naming the cluster and its brokers. */
function unreachable(e: LakehouseError, cluster: KafkaClusterRef): LakehouseError | undefined {
  if (e.code !== 'KAFKA_UNAVAILABLE') return undefined;
  return new UnavailableError(
    `source: Kafka cluster "${cluster.name}" (${cluster.bootstrapServers.join(', ')}) did not answer the Spark server; nothing was created (${e.message})`,
    { cause: e, code: 'KAFKA_UNAVAILABLE' },
  );
}

/** A JAAS string literal: backslashes and quotes escaped. */
const jaasQuoted = (s: string) => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;

const LOGIN_MODULES = {
  PLAIN: 'org.apache.kafka.common.security.plain.PlainLoginModule',
  'SCRAM-SHA-256': 'org.apache.kafka.common.security.scram.ScramLoginModule',
  'SCRAM-SHA-512': 'org.apache.kafka.common.security.scram.ScramLoginModule',
} as const;

/**
 * The JAAS line carrying the SASL password: a secret itself, composed only when revealed (when
 * the plan is sent), and registered for scrubbing in its composed form too.
 */
class JaasConfig extends Secret {
  readonly #build: () => string;
  constructor(build: () => string) {
    super('');
    this.#build = build;
  }
  override reveal(): string {
    const value = this.#build();
    registerSecretValue(value);
    return value;
  }
}

/** Spark's Kafka source options for a cluster: `kafka.*` consumer settings from the platform only. */
export function connectionOptions(cluster: KafkaClusterRef): Record<string, OptionValue> {
  const options: Record<string, OptionValue> = {
    'kafka.bootstrap.servers': cluster.bootstrapServers.join(','),
    'kafka.security.protocol': cluster.securityProtocol,
  };
  const { sasl, tls } = cluster;
  if (sasl) {
    options['kafka.sasl.mechanism'] = sasl.mechanism;
    const jaas = new JaasConfig(
      () => `${LOGIN_MODULES[sasl.mechanism]} required username=${jaasQuoted(sasl.username)} password=${jaasQuoted(sasl.password.reveal())};`,
    );
    options['kafka.sasl.jaas.config'] = { secret: jaas };
  }
  if (tls?.truststoreLocation !== undefined) options['kafka.ssl.truststore.location'] = tls.truststoreLocation;
  if (tls?.truststoreType !== undefined) options['kafka.ssl.truststore.type'] = tls.truststoreType;
  if (tls?.truststorePassword !== undefined) options['kafka.ssl.truststore.password'] = { secret: tls.truststorePassword };
  return options;
}

/** `subscribe` or `subscribePattern`, from a granted selection. */
export function subscription(selection: TopicSelection): Record<string, string> {
  return 'topics' in selection ? { subscribe: selection.topics.join(',') } : { subscribePattern: globToJavaRegex(selection.pattern) };
}
