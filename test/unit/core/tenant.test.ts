import { describe, expect, it } from 'vitest';
import { isUnderRoot, tenantContext } from '../../../src/core/tenant.js';
import { quoteName, sameLocation } from '../../../src/core/naming.js';

describe('tenant context and naming', () => {
  it('derives layout, namespaces and table names from the tenant', () => {
    const t = tenantContext('acme', 's3a://lake/acme/');
    expect(t.location('bronze', 'orders_cdc')).toBe('s3a://lake/acme/bronze/orders_cdc');
    expect(t.table('lake', 'silver', 'orders')).toEqual({ catalog: 'lake', namespace: 'acme_silver', table: 'orders' });
  });

  it('quotes every identifier part, doubling backticks', () => {
    expect(quoteName(['lake', 'acme_silver', 'we`ird'])).toBe('`lake`.`acme_silver`.`we``ird`');
  });

  it('checks storage roots segment by segment', () => {
    const roots = ['s3a://lake/acme'];
    expect(isUnderRoot('s3a://lake/acme', roots)).toBe(true);
    expect(isUnderRoot('s3a://lake/acme/silver', roots)).toBe(true);
    expect(isUnderRoot('S3A://LAKE/acme/x', roots)).toBe(true);
    expect(isUnderRoot('s3a://lake/acme2', roots)).toBe(false);
    expect(isUnderRoot('s3a://lake/acme/../globex', roots)).toBe(false);
    expect(isUnderRoot('s3a://other/acme', roots)).toBe(false);
    expect(isUnderRoot('file:///lake/acme', roots)).toBe(false);
    expect(isUnderRoot('not a uri', roots)).toBe(false);
  });

  it('reads s3:// and s3a:// as one root (both are S3A), and keeps the scheme the config wrote', () => {
    expect(isUnderRoot('s3://lake/acme/silver/orders', ['s3a://lake/acme'])).toBe(true);
    expect(isUnderRoot('s3a://lake/acme/silver/orders', ['s3://lake/acme'])).toBe(true);
    expect(isUnderRoot('S3://lake/acme', ['s3a://LAKE/acme/'])).toBe(true);
    expect(isUnderRoot('s3://lake/acme2', ['s3a://lake/acme'])).toBe(false);
    expect(isUnderRoot('s3://other/acme', ['s3a://lake/acme'])).toBe(false);
    // Only s3 and s3a: another scheme is another file system, whatever its bucket.
    expect(isUnderRoot('s3n://lake/acme', ['s3a://lake/acme'])).toBe(false);
    expect(isUnderRoot('gs://lake/acme', ['s3a://lake/acme'])).toBe(false);
    expect(sameLocation('s3://lake/acme/silver/orders', 's3a://lake/acme/silver/orders/')).toBe(true);
    expect(sameLocation('s3://lake/acme/silver/orders', 's3a://lake/acme/silver/order')).toBe(false);
    expect(tenantContext('acme', 's3://lake/acme').location('silver', 'orders')).toBe('s3://lake/acme/silver/orders');
  });
});
