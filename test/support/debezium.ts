import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { schemaRegistryUrl } from './avro.js';
import { kafkaBootstrap } from './kafka.js';
import { requireNeed } from './needs.js';
import { type Postgres, startPostgres } from './postgres.js';
import { repoRoot } from './stack.js';

/**
 * Real change data capture for the tests: the stack's PostgreSQL with logical decoding
 * (scripts/postgres start --logical) and Debezium's PostgreSQL connector in the stack's Kafka
 * Connect worker (scripts/kafka-connect at KAFKA_CONNECT_PORT): a file declares
 * needs('spark', 'kafka', 'kafka-connect', 'postgres', 'py-tools'), which starts the worker once per
 * run (test/support/needs.ts). Each test registers connectors of its own: a topic prefix, a slot and
 * a publication per connector, so tests never see each other's changes.
 */

const connect = join(repoRoot, 'scripts/kafka-connect');
const env = () => ({ ...process.env, KAFKA_PORT: kafkaBootstrap().split(':').pop()! });

export interface DebeziumSource {
  readonly name: string;
  /** The change topic of a table of schema public: `<name>.public.<table>`. */
  topic(table: string): string;
  stop(): void;
}

/**
 * Kafka Connect's Avro converter for keys or values (`key.converter` or `value.converter`), writing
 * the Confluent wire format to the stack's schema registry, as docs/schema-registry.md configures
 * Apicurio's converter: the registry's own API (auto-registering each new schema), the 4-byte
 * header of Confluent's serializers, and the content id, the schema id the Confluent API answers.
 */
export function avroConverter(prefix: 'key.converter' | 'value.converter'): Record<string, string> {
  const api = schemaRegistryUrl().replace(/\/apis\/ccompat\/v7\/?$/, '/apis/registry/v2');
  return {
    [prefix]: 'io.apicurio.registry.utils.converter.AvroConverter',
    [`${prefix}.apicurio.registry.url`]: api,
    [`${prefix}.apicurio.registry.auto-register`]: 'true',
    [`${prefix}.apicurio.registry.as-confluent`]: 'true',
    [`${prefix}.apicurio.registry.use-id`]: 'contentId',
  };
}

/**
 * Register a Debezium PostgreSQL connector named `name` (lower snake case: it is also the slot's and
 * the publication's name) for `tables` of the test database, with the JSON converter (`schemas`:
 * with or without its schema/payload wrapper) or with Apicurio's Avro converter (`avro`: keys and
 * values in Avro, the file needs the schema registry), and `settings` on top (e.g. decimal.handling.mode).
 * Returns once the connector and its task run; its snapshot may still be under way.
 */
export function debeziumSource(
  pg: Postgres,
  dir: string,
  name: string,
  tables: string[],
  opts: { schemas?: boolean; avro?: boolean; settings?: Record<string, string> } = {},
): DebeziumSource {
  requireNeed('a Debezium connector (the Kafka Connect worker)', 'kafka-connect');
  const secret = join(dir, `${name}.properties`);
  writeFileSync(secret, `password=${pg.password}\n`, { mode: 0o600 });
  const url = new URL(pg.url.replace(/^jdbc:/, ''));
  const config = {
    'connector.class': 'io.debezium.connector.postgresql.PostgresConnector',
    'tasks.max': '1',
    'database.hostname': url.hostname,
    'database.port': url.port,
    'database.dbname': url.pathname.slice(1),
    'database.user': pg.user,
    'database.password': `\${file:${secret}:password}`,
    'topic.prefix': name,
    'plugin.name': 'pgoutput',
    'slot.name': name,
    'slot.drop.on.stop': 'true',
    'publication.name': name,
    'publication.autocreate.mode': 'filtered',
    'table.include.list': tables.map((t) => `public.${t}`).join(','),
    'topic.creation.default.replication.factor': '1',
    'topic.creation.default.partitions': '1',
    ...(opts.avro
      ? { ...avroConverter('key.converter'), ...avroConverter('value.converter') }
      : {
          'key.converter': 'org.apache.kafka.connect.json.JsonConverter',
          'key.converter.schemas.enable': String(opts.schemas ?? true),
          'value.converter': 'org.apache.kafka.connect.json.JsonConverter',
          'value.converter.schemas.enable': String(opts.schemas ?? true),
        }),
    ...opts.settings,
  };
  execFileSync('bash', [connect, 'register', name], { env: env(), input: JSON.stringify(config), stdio: ['pipe', 'ignore', 'inherit'], timeout: 300_000 });
  return {
    name,
    topic: (table) => `${name}.public.${table}`,
    stop: () => execFileSync('bash', [connect, 'unregister', name], { env: env(), stdio: ['ignore', 'ignore', 'inherit'] }),
  };
}

/** The stack's PostgreSQL with logical decoding. */
export function startCdcPostgres(): Postgres {
  return startPostgres({ logical: true });
}
