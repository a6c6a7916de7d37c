import { execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { requireNeed } from './needs.js';
import { repoRoot } from './stack.js';

/**
 * The local Kafka broker of the integration tests (started by the global setup, or
 * LAKEHOUSE_KAFKA_BOOTSTRAP), driven by `scripts/kafka tool`: kafka-clients on the broker's own
 * jars, so producing needs nothing else installed.
 */

export function kafkaBootstrap(): string {
  requireNeed('the Kafka broker', 'kafka');
  return process.env.LAKEHOUSE_KAFKA_BOOTSTRAP ?? `127.0.0.1:${process.env.KAFKA_PORT ?? '19092'}`;
}

function tool(args: string[], input?: string): string {
  const port = kafkaBootstrap().split(':').pop()!;
  return execFileSync('bash', [join(repoRoot, 'scripts/kafka'), 'tool', '--port', port, ...args], {
    input: input ?? '',
    stdio: ['pipe', 'pipe', 'inherit'],
    timeout: 300_000,
  }).toString();
}

export function createTopic(name: string, partitions: number): void {
  tool(['create-topic', name, String(partitions)]);
}

/** The topic's end offsets by partition (none: the topic does not exist yet). */
export function endOffsets(topic: string): Record<string, number> {
  return JSON.parse(tool(['end-offsets', topic]).trim().split('\n').pop() ?? '{}') as Record<string, number>;
}

/** Wait until the topic holds at least `count` records (all partitions), or fail after `ms`: its records then. */
export function waitForRecords(topic: string, count: number, ms = 180_000): number {
  return waitForTopics({ [topic]: count }, ms)[topic]!;
}

/**
 * Wait until each topic holds at least its count of records, or fail after `ms`: one process asks
 * the broker until then (a JVM start per question would cost seconds each on a loaded machine).
 */
export function waitForTopics(counts: Record<string, number>, ms = 180_000): Record<string, number> {
  const wanted = Object.entries(counts).map(([t, n]) => `${t}=${n}`);
  try {
    return JSON.parse(
      tool(['wait-records', String(Math.ceil(ms / 1000)), ...wanted])
        .trim()
        .split('\n')
        .pop()!,
    ) as Record<string, number>;
  } catch (e) {
    throw new Error(`the topics did not reach their records within ${ms / 1000} s (wanted ${wanted.join(', ')}): ${(e as Error).message}`);
  }
}

/** Remove a partition's records before `offset`, as retention would: a reader behind it lost data. */
export function deleteRecords(topic: string, partition: number, offset: number): void {
  tool(['delete-records', topic, String(partition), String(offset)]);
}

export interface KafkaRecord {
  key?: string | null;
  /** A string (its UTF-8), JSON (its text), or null; a Buffer is sent as its bytes. */
  value: unknown;
  partition?: number;
  headers?: Record<string, string>;
}

export interface RecordId {
  topic: string;
  partition: number;
  offset: number;
}

/** One record as the tool reads it: a JSON line (a Buffer value as `valueBase64`). */
const recordLine = (r: KafkaRecord) => JSON.stringify(Buffer.isBuffer(r.value) ? { ...r, value: undefined, valueBase64: r.value.toString('base64') } : r);

/** Produce records (idempotent producer, acks=all); their (topic, partition, offset), in order. */
export function produce(topic: string, records: readonly KafkaRecord[]): RecordId[] {
  const out = tool(['produce', topic], records.map(recordLine).join('\n') + '\n');
  return out
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as RecordId);
}

export const recordKey = (r: {
  topic?: unknown;
  partition?: unknown;
  offset?: unknown;
  _kafka_topic?: unknown;
  _kafka_partition?: unknown;
  _kafka_offset?: unknown;
}): string => `${String(r._kafka_topic ?? r.topic)}/${String(r._kafka_partition ?? r.partition)}/${String(r._kafka_offset ?? r.offset)}`;

/**
 * A decimal as Debezium's default `decimal.handling.mode=precise` sends it in JSON: base64 of the
 * unscaled value's big-endian two's-complement bytes (`"LxI="` for 120.50 at scale 2).
 */
export function debeziumDecimal(value: string, scale: number): string {
  const [int, frac = ''] = value.replace('-', '').split('.');
  let unscaled = BigInt(int! + frac.padEnd(scale, '0').slice(0, scale));
  if (value.startsWith('-')) unscaled = -unscaled;
  const bytes: number[] = [];
  for (let v = unscaled; ; v >>= 8n) {
    bytes.unshift(Number(v & 0xffn));
    if ((v >= -128n && v < 128n && v < 0n === ((bytes[0]! & 0x80) !== 0)) || bytes.length > 32) break;
  }
  return Buffer.from(bytes).toString('base64');
}

/**
 * A producer that keeps sending while a test runs: one kafka-clients process (`scripts/kafka tool
 * produce`) fed line by line, so each record leaves as it is written (the client's linger is a few
 * ms), not when the test is done. `acked(n)` resolves once the broker has acknowledged the first n
 * records; `stop` ends its input and resolves with every record's (topic, partition, offset), in
 * the order sent.
 */
export function startProducer(topic: string): {
  send: (records: readonly KafkaRecord[]) => void;
  acked: (n: number) => Promise<void>;
  stop: () => Promise<RecordId[]>;
} {
  const port = kafkaBootstrap().split(':').pop()!;
  const child = spawn('bash', [join(repoRoot, 'scripts/kafka'), 'tool', '--port', port, 'produce', topic], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  const ids: RecordId[] = [];
  const waiting: { n: number; resolve: () => void }[] = [];
  child.stdout.on('data', (b: Buffer) => {
    out += b.toString();
    const lines = out.split('\n');
    out = lines.pop()!;
    for (const l of lines.filter(Boolean)) ids.push(JSON.parse(l) as RecordId);
    for (const w of [...waiting])
      if (ids.length >= w.n) {
        waiting.splice(waiting.indexOf(w), 1);
        w.resolve();
      }
  });
  const ended = new Promise<number | null>((resolve) => child.on('close', resolve));
  let sent = 0;
  return {
    send: (records) => {
      for (const r of records) child.stdin.write(`${recordLine(r)}\n`);
      sent += records.length;
    },
    acked: (n) =>
      ids.length >= n
        ? Promise.resolve()
        : Promise.race([
            new Promise<void>((resolve) => waiting.push({ n, resolve })),
            ended.then((code) => {
              throw new Error(`the producer of ${topic} exited ${code} having acknowledged ${ids.length} of ${n} records`);
            }),
          ]),
    stop: async () => {
      child.stdin.end();
      const code = await ended;
      if (code !== 0 || ids.length !== sent) throw new Error(`the producer of ${topic} exited ${code} having acknowledged ${ids.length} of ${sent} records`);
      return ids;
    },
  };
}
