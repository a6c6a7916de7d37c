// The closing lines of scripts/test, from vitest's JSON report and its exit code:
//   node scripts/test-summary.mjs <report.json> <vitest exit code>
// First the failed tests, the failed files (a file that did not load or whose hook failed has no
// failed test, yet fails the run) and the skipped tests, by name; then one line, alone, that CI
// parses: `N passed, N failed` (`, N skipped` when some were). A failed file counts as one failure,
// and a non-zero exit is never reported as `0 failed`.
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

const [reportPath, exitArg] = process.argv.slice(2);
const exitCode = Number(exitArg ?? 0);
const SKIPPED = new Set(['pending', 'skipped', 'todo', 'disabled']);

const firstLine = (text) =>
  String(text ?? '')
    .trim()
    .split('\n')[0] ?? '';
const file = (name) => relative(process.cwd(), name) || name;

let passed = 0;
const failed = [];
const skipped = [];
let report;
try {
  report = JSON.parse(readFileSync(reportPath, 'utf8'));
} catch (e) {
  failed.push(`vitest wrote no readable report (exit ${exitCode}; ${firstLine(e.message)})`);
}
for (const result of report?.testResults ?? []) {
  let failedHere = 0;
  for (const t of result.assertionResults ?? []) {
    const name = `${file(result.name)} > ${[...(t.ancestorTitles ?? []), t.title].join(' > ')}`;
    if (t.status === 'passed') passed++;
    else if (t.status === 'failed') {
      failedHere++;
      failed.push(`${name}: ${firstLine(t.failureMessages?.[0])}`);
    } else if (SKIPPED.has(t.status)) skipped.push(name);
  }
  if (result.status === 'failed' && failedHere === 0) {
    failed.push(`${file(result.name)} (the file failed: ${firstLine(result.message) || 'no message'})`);
  }
}
if (report && exitCode !== 0 && failed.length === 0) {
  failed.push(`vitest exited with ${exitCode} though no test failed (an unhandled error? see its output above)`);
}

for (const name of failed) console.log(`failed: ${name}`);
for (const name of skipped) console.log(`skipped: ${name}`);
console.log(`${passed} passed, ${failed.length} failed` + (skipped.length ? `, ${skipped.length} skipped` : ''));
