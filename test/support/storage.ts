import { existsSync, mkdirSync, readdirSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { objectStoreMkdir, objectsUnder, putObject, removeObjects } from './stack.js';
import { tempFiles } from './files.js';

/**
 * A tenant's files as a test sees them, on a local folder (file://) or on the object store
 * (s3a://, through pyarrow's own S3 client, never Spark's): what the location-check and
 * maintenance suites assert about, written once for both storages.
 */

const local = (uri: string) => uri.replace(/^file:\/\//, '');
const isS3 = (uri: string) => /^s3a?:\/\//.test(uri);

/** The files under `uri`, recursively, as paths relative to it (`/data/x.parquet`), sorted. */
export function filesUnder(uri: string): string[] {
  if (isS3(uri)) return objectsUnder(uri).map((o) => o.path);
  const at = local(uri);
  if (!existsSync(at)) return [];
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name));
      else out.push(join(d, e.name).slice(at.length));
    }
  };
  walk(at);
  return out.sort();
}

/** Does a file exist at `uri`? */
export function fileExists(uri: string): boolean {
  if (!isS3(uri)) return existsSync(local(uri));
  const parent = uri.slice(0, uri.lastIndexOf('/'));
  return filesUnder(parent).includes(uri.slice(parent.length));
}

/**
 * Write a file at `uri`. On a local folder `ageHours` back-dates it; an object's time is the time of
 * its upload and cannot be set, so on S3 it is refused (a test that needs an old file is local only).
 */
export function writeFileAt(uri: string, content: string | Buffer, ageHours = 0): void {
  if (isS3(uri)) {
    if (ageHours) throw new Error('an object cannot be back-dated');
    const tmp = join(tempFiles({}), 'object');
    writeFileSync(tmp, content);
    putObject(uri, tmp);
    return;
  }
  mkdirSync(dirname(local(uri)), { recursive: true });
  writeFileSync(local(uri), content);
  if (ageHours) {
    const old = new Date(Date.now() - ageHours * 3_600_000);
    utimesSync(local(uri), old, old);
  }
}

/**
 * An empty "folder" at `uri`: a local directory, or on S3 a directory marker (a zero-byte object
 * named `<key>/`, as S3A's mkdirs and consoles leave them): S3 has no directories.
 */
export function makeFolder(uri: string): void {
  if (isS3(uri)) objectStoreMkdir(uri);
  else mkdirSync(local(uri), { recursive: true });
}

/** Remove everything under `uri`. */
export function removeAll(uri: string): void {
  if (isS3(uri)) removeObjects(uri);
}
