// The closing lines of scripts/test, from vitest's JSON reports and their exit codes:
//   node scripts/test-summary.mjs [--expect FILE] [--failed TEXT] <report.json> <vitest exit code> [<report.json> <exit code> ...]
// (one pair per vitest process of the run; --expect names a file listing, one a line, the test files
// the run was to run; --failed, repeatable, a failure of the run outside any report). First the ten slowest files with their times; then the failed tests, the
// failed files (a file that did not load or whose hook failed has no failed test, yet fails the run;
// so does an expected file that no report holds) and the skipped tests, by name; then one line,
// alone, that CI parses: `N passed, N failed` (`, N skipped` when some were). A failed file counts
// as one failure, and a non-zero exit is never reported as `0 failed`.
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

const SKIPPED = new Set(['pending', 'skipped', 'todo', 'disabled']);
const SLOWEST = 10;

const firstLine = (text) =>
  String(text ?? '')
    .trim()
    .split('\n')[0] ?? '';
const file = (name) => relative(process.cwd(), name) || name;

const args = process.argv.slice(2);
let expected = [];
const failed = [];
while (args[0] === '--expect' || args[0] === '--failed') {
  const [option, value] = args.splice(0, 2);
  if (option === '--expect') expected = readFileSync(value, 'utf8').split('\n').filter(Boolean);
  else failed.push(value);
}
const pairs = [];
for (let i = 0; i < args.length; i += 2) pairs.push([args[i], Number(args[i + 1] ?? 0)]);

let passed = 0;
const skipped = [];
const durations = [];
const seen = new Set();
for (const [reportPath, exitCode] of pairs) {
  let report;
  try {
    report = JSON.parse(readFileSync(reportPath, 'utf8'));
  } catch (e) {
    failed.push(`vitest wrote no readable report (exit ${exitCode}; ${firstLine(e.message)})`);
    continue;
  }
  const failedBefore = failed.length;
  for (const result of report.testResults ?? []) {
    const path = file(result.name);
    seen.add(path);
    if (result.endTime > result.startTime) durations.push([path, (result.endTime - result.startTime) / 1000]);
    let failedHere = 0;
    for (const t of result.assertionResults ?? []) {
      const name = `${path} > ${[...(t.ancestorTitles ?? []), t.title].join(' > ')}`;
      if (t.status === 'passed') passed++;
      else if (t.status === 'failed') {
        failedHere++;
        failed.push(`${name}: ${firstLine(t.failureMessages?.[0])}`);
      } else if (SKIPPED.has(t.status)) skipped.push(name);
    }
    if (result.status === 'failed' && failedHere === 0) {
      failed.push(`${path} (the file failed: ${firstLine(result.message) || 'no message'})`);
    }
  }
  if (exitCode !== 0 && failed.length === failedBefore) {
    failed.push(`vitest exited with ${exitCode} though no test failed (an unhandled error? see its output above)`);
  }
}
for (const path of expected) if (!seen.has(path)) failed.push(`${path} (the file did not run: no report holds it)`);

if (durations.length) {
  console.log(`slowest files:`);
  for (const [path, s] of durations.sort((a, b) => b[1] - a[1]).slice(0, SLOWEST)) console.log(`${s.toFixed(1).padStart(8)} s  ${path}`);
}
for (const name of failed) console.log(`failed: ${name}`);
for (const name of skipped) console.log(`skipped: ${name}`);
console.log(`${passed} passed, ${failed.length} failed` + (skipped.length ? `, ${skipped.length} skipped` : ''));
