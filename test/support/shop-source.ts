import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The examples' application database: a SQLite file (`<lake home>/sources/shop.db`) whose table
 * `orders_cdc` holds one day's change events, as a CDC tool would leave them and as
 * `jdbc-snapshot-ingest.v1.conf` reads them.
 */

/** One change event: order id, customer, status, amount, event time, op (c/u/d). */
export type OrderEvent = readonly [id: number, customer: string, status: string, amount: number, ts: string, op: 'c' | 'u' | 'd'];

/** scripts/quickstart's events of its two days. */
export const QUICKSTART_ORDERS: Readonly<Record<'2026-07-05' | '2026-07-06', readonly OrderEvent[]>> = {
  // Order 1 created and paid, 2 and 4 created, 3 created and deleted.
  '2026-07-05': [
    [1, 'alice', 'NEW', 10.0, '2026-07-05 08:00:00', 'c'],
    [1, 'alice', 'PAID', 10.0, '2026-07-05 09:00:00', 'u'],
    [2, 'bob', 'NEW', 25.5, '2026-07-05 08:30:00', 'c'],
    [3, 'carol', 'NEW', 7.25, '2026-07-05 08:45:00', 'c'],
    [3, 'carol', 'NEW', 7.25, '2026-07-05 10:00:00', 'd'],
    [4, 'dave', 'NEW', 99.99, '2026-07-05 11:00:00', 'c'],
  ],
  // Order 2 ships, 4 is deleted, 5 is created, and a late copy of 3's creation arrives.
  '2026-07-06': [
    [2, 'bob', 'SHIPPED', 25.5, '2026-07-06 09:00:00', 'u'],
    [4, 'dave', 'NEW', 99.99, '2026-07-06 09:30:00', 'd'],
    [5, 'erin', 'NEW', 42.0, '2026-07-06 10:00:00', 'c'],
    [3, 'carol', 'NEW', 7.25, '2026-07-05 08:45:00', 'c'],
  ],
};

/** Replaces the source table's rows with `events` (the table is created on first use). */
export function writeOrderEvents(lakeHome: string, events: readonly OrderEvent[]): void {
  mkdirSync(join(lakeHome, 'sources'), { recursive: true });
  execFileSync('python3', [
    '-c',
    `import json, sqlite3, sys
con = sqlite3.connect(sys.argv[1])
con.execute("CREATE TABLE IF NOT EXISTS orders_cdc (id INTEGER, customer TEXT, status TEXT, amount DECIMAL(12,2), ts TEXT, op TEXT)")
con.execute("DELETE FROM orders_cdc")
con.executemany("INSERT INTO orders_cdc VALUES (?, ?, ?, ?, ?, ?)", json.loads(sys.argv[2]))
con.commit()`,
    join(lakeHome, 'sources/shop.db'),
    JSON.stringify(events),
  ]);
}
