// Our Spark Connect schema subset against the server's own .proto files, read at test time from
// the spark-connect jar of the project's Spark install (never committed). Every message, field,
// enum value and rpc we declare must carry the same wire facts as theirs.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fromBinary } from '@bufbuild/protobuf';
import { FileDescriptorSetSchema, type FileDescriptorSet } from '@bufbuild/protobuf/wkt';
import { afterAll, describe, expect, it } from 'vitest';
import { compareDescriptorSets, countElements } from '../../support/proto-compare.js';
import { needs } from '../../support/needs.js';

needs('spark-install');

const root = fileURLToPath(new URL('../../../', import.meta.url));
const buf = join(root, 'node_modules/.bin/buf');

/** The spark-connect jar of the project's Spark install (the need 'spark-install'). */
function sparkConnectJar(): string {
  const home = execFileSync('bash', [join(root, 'scripts/spark-connect'), 'spark-home'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
  const jars = join(home, 'jars');
  const jar = existsSync(jars) ? readdirSync(jars).find((f) => /^spark-connect_2\.13-.*\.jar$/.test(f)) : undefined;
  if (!jar) throw new Error(`no spark-connect_2.13-*.jar under ${jars}`);
  return join(jars, jar);
}

function extractProtos(jar: string, into: string): void {
  try {
    execFileSync('unzip', ['-q', '-o', jar, 'spark/connect/*.proto', '-d', into], { stdio: 'pipe' });
  } catch {
    // No unzip on this machine: Python is there (the Spark install needs it).
    execFileSync(
      'python3',
      [
        '-c',
        'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); [z.extract(n, sys.argv[2]) for n in z.namelist() if n.startswith("spark/connect/") and n.endswith(".proto")]',
        jar,
        into,
      ],
      {
        stdio: 'pipe',
      },
    );
  }
}

function build(moduleDir: string, out: string): FileDescriptorSet {
  execFileSync(buf, ['build', moduleDir, '-o', out], { cwd: moduleDir, stdio: 'pipe' });
  return fromBinary(FileDescriptorSetSchema, readFileSync(out));
}

describe('protocol conformance with the Spark Connect server', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'lakehouse-proto-conformance-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('declares every element exactly as the server does', () => {
    const jar = sparkConnectJar();
    const theirsDir = join(scratch, 'theirs');
    mkdirSync(theirsDir);
    extractProtos(jar, theirsDir);
    expect(readdirSync(join(theirsDir, 'spark/connect')), `no .proto files in ${jar}`).toContain('base.proto');
    // Their files import google/protobuf/*.proto, which buf provides.
    writeFileSync(join(theirsDir, 'buf.yaml'), 'version: v2\n');

    const theirs = build(theirsDir, join(scratch, 'theirs.binpb'));
    const ours = build(join(root, 'src/spark/proto'), join(scratch, 'ours.binpb'));

    const counts = countElements(ours);
    expect(counts.messages).toBeGreaterThan(100);
    expect(counts.methods).toBe(8);
    const problems = compareDescriptorSets(ours, theirs);
    expect(problems, `our schema differs from ${jar.split('/').pop()}:\n${problems.join('\n')}`).toEqual([]);
  });
});
