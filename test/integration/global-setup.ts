import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * Integration tests run against the project's own local Spark Connect server: started here unless
 * one is already running (then reused and left running). A server started here is stopped after
 * the run unless LAKEHOUSE_KEEP_SPARK=1. SPARK_REMOTE, when set, points the tests elsewhere.
 * The stack's Iceberg REST catalog (scripts/iceberg-rest, the Spark catalog "rest") and its object
 * store (scripts/object-store) are started and stopped the same way, next to the server.
 */
const script = fileURLToPath(new URL('../../scripts/spark-connect', import.meta.url));
const restScript = fileURLToPath(new URL('../../scripts/iceberg-rest', import.meta.url));

function isRunning(path: string): boolean {
  try {
    execFileSync('bash', [path, 'status'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export default function setup(): () => void {
  // SPARK_REMOTE names a stack someone else runs: start nothing next to it (its Kafka, if the run
  // needs one, is LAKEHOUSE_KAFKA_BOOTSTRAP or KAFKA_PORT), never a broker on the default port.
  const external = Boolean(process.env.SPARK_REMOTE);
  const stopKafka = external ? () => undefined : startKafka();
  const stopConnect = external ? () => undefined : kafkaConnectStopper();
  // Before Spark: the server takes the store's access key from the file its first start writes.
  const stopStore = external ? () => undefined : startObjectStore();
  const stopSpark = startSpark();
  return () => {
    stopSpark();
    stopStore();
    stopConnect();
    stopKafka();
  };
}

/**
 * The local object store (scripts/object-store, OBJECT_STORE_PORT or 18333) for the tests whose
 * tenants live on S3: started here unless running (then reused), stopped after the run unless
 * LAKEHOUSE_KEEP_OBJECT_STORE=1.
 */
function startObjectStore(): () => void {
  const store = fileURLToPath(new URL('../../scripts/object-store', import.meta.url));
  const running = isRunning(store);
  execFileSync('bash', [store, 'start'], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 1_800_000 });
  return () => {
    if (!running && process.env.LAKEHOUSE_KEEP_OBJECT_STORE !== '1') execFileSync('bash', [store, 'stop'], { stdio: 'inherit' });
  };
}

/**
 * The stack's Kafka Connect worker (scripts/kafka-connect: Debezium's connector) is started by the
 * CDC tests that need it (test/support/debezium.ts); one they started is stopped after the run,
 * before the broker, unless LAKEHOUSE_KEEP_KAFKA=1.
 */
function kafkaConnectStopper(): () => void {
  const connect = fileURLToPath(new URL('../../scripts/kafka-connect', import.meta.url));
  const running = isRunning(connect);
  return () => {
    if (running || process.env.LAKEHOUSE_KEEP_KAFKA === '1' || !isRunning(connect)) return;
    execFileSync('bash', [connect, 'stop'], { stdio: 'inherit' });
  };
}

/**
 * The local Kafka broker (scripts/kafka, KAFKA_PORT or 19092) next to Spark, for the Kafka tests:
 * started here unless running (then reused), stopped after the run unless LAKEHOUSE_KEEP_KAFKA=1.
 * LAKEHOUSE_KAFKA_BOOTSTRAP, when set, points the tests at another broker.
 */
function startKafka(): () => void {
  if (process.env.LAKEHOUSE_KAFKA_BOOTSTRAP) return () => undefined;
  const kafka = fileURLToPath(new URL('../../scripts/kafka', import.meta.url));
  let running = true;
  try {
    execFileSync('bash', [kafka, 'status'], { stdio: 'ignore' });
  } catch {
    running = false;
  }
  const out = execFileSync('bash', [kafka, 'start'], { stdio: ['ignore', 'pipe', 'inherit'], timeout: 600_000 }).toString();
  process.env.LAKEHOUSE_KAFKA_BOOTSTRAP = out.trim().split('\n').pop();
  return () => {
    if (!running && process.env.LAKEHOUSE_KEEP_KAFKA !== '1') execFileSync('bash', [kafka, 'stop'], { stdio: 'inherit' });
  };
}

function startSpark(): () => void {
  if (process.env.SPARK_REMOTE) return () => undefined;
  const restRunning = isRunning(restScript);
  execFileSync('bash', [restScript, 'start'], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 600_000 });
  const running = isRunning(script);
  const out = execFileSync('bash', [script, 'start'], { stdio: ['ignore', 'pipe', 'inherit'], timeout: 900_000 }).toString();
  process.env.SPARK_REMOTE = out.trim().split('\n').pop();
  return () => {
    if (process.env.LAKEHOUSE_KEEP_SPARK === '1') return;
    if (!running) execFileSync('bash', [script, 'stop'], { stdio: 'inherit' });
    if (!restRunning) execFileSync('bash', [restScript, 'stop'], { stdio: 'inherit' });
  };
}
