/** The client_type we announce to the server: `[<user agent> ]lakehouse-jobs/<version>`. */
import { VERSION } from '../version.js';

export function clientType(userAgent?: string): string {
  const ours = `lakehouse-jobs/${VERSION}`;
  return userAgent && userAgent !== ours ? `${userAgent} ${ours}` : ours;
}
