import { v7 } from 'uuid';

/**
 * UUIDv7 (RFC 9562, the uuid package): 48 bits of Unix milliseconds, then random bits. OpenLineage
 * recommends it for run ids: ids sort by the time the run started, and a backend can index them by time.
 */
export function uuidv7(now: number = Date.now()): string {
  return v7({ msecs: now });
}

export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
