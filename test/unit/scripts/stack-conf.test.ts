// scripts/stack/spark-connect.conf's placeholders become paths of the checkout, which may hold
// spaces. Spark splits Java options on whitespace (honouring double quotes), so every placeholder
// inside a *JavaOptions value must sit inside double quotes, or the JVM takes the rest of the path
// for its main class.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../../support/stack.js';

const conf = readFileSync(join(repoRoot, 'scripts/stack/spark-connect.conf'), 'utf8');

/** The value's whitespace-separated words, double-quoted spans kept whole (Spark's splitCommandString, simplified). */
function words(value: string): string[] {
  return value.match(/(?:[^\s"]+|"[^"]*")+/g) ?? [];
}

describe('spark-connect.conf', () => {
  const javaOptions = conf
    .split('\n')
    .map((l) => /^(\S*JavaOptions)\s+(.*)$/.exec(l.trim()))
    .filter((m): m is RegExpExecArray => m !== null);

  it('quotes every placeholder inside Java options', () => {
    expect(javaOptions.length).toBeGreaterThan(0);
    for (const [, key, value] of javaOptions) {
      for (const word of words(value!).filter((w) => w.includes('${'))) {
        expect(/^"[^"]*"$/.test(word) || /^[^"]*="[^"]*"$/.test(word), `${key}: ${word}`).toBe(true);
        expect(words(word.replaceAll(/\$\{[A-Z0-9_]+\}/g, '/a dir/with space')), `${key}: ${word}`).toHaveLength(1);
      }
    }
  });
});

describe('the scheduler: FAIR between tenants', () => {
  // Each tenant's work runs in its own pool (spark-plugins/…/SchedulerPools.java), which shares the
  // cores only on a FAIR server: the stack (and compose.yaml, which reads the same file) and the
  // Kubernetes example's server say so alike.
  it('is set in the stack settings and in the Kubernetes example server', () => {
    expect(conf).toMatch(/^spark\.scheduler\.mode\s+FAIR$/m);
    const k8s = readFileSync(join(repoRoot, 'configs/examples/kubernetes/spark-connect.yaml'), 'utf8');
    expect(k8s).toMatch(/^\s+spark\.scheduler\.mode: FAIR$/m);
  });
});
