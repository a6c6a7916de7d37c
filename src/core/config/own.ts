/**
 * Lookups by a name a config gives (a catalog, a connection, a tenant …): only a record's own keys
 * count. A plain object answers `constructor`, `toString` or `__proto__` from its prototype, which
 * made such a name a lookup that succeeded (or a TypeError, 70) where it must be an unknown name (78).
 */

/** The value `record` holds under `key` as its own property; undefined for any other name. */
export function own<T>(record: Readonly<Record<string, T>> | undefined, key: string): T | undefined {
  return record !== undefined && Object.hasOwn(record, key) ? record[key] : undefined;
}

/** A copy without a prototype: a lookup by any name finds only the record's own keys. */
export function nullPrototype<T>(record: Readonly<Record<string, T>>): Record<string, T> {
  return Object.assign(Object.create(null) as Record<string, T>, record);
}
