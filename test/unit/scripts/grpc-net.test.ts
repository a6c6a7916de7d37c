import { createRequire } from 'node:module';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
// @ts-expect-error -- a build script (plain JavaScript, no declarations)
import { grpcNetSource } from '../../../scripts/build/grpc-net.mjs';

/** scripts/build/grpc-net.mjs: the `net` grpc-js gets in the bundle. */

function load(): typeof net {
  const module = { exports: {} as typeof net };
  new Function('require', 'module', grpcNetSource as string)(createRequire(import.meta.url), module);
  return module.exports;
}

describe("grpc-js's net in the bundle", () => {
  const shim = load();
  const addresses = [
    '127.0.0.1',
    '10.0.0.255',
    'localhost',
    'spark-connect.spark.svc.cluster.local',
    '',
    '::',
    '::1',
    '[::1]',
    '1:2:3:4:5:6:7:8',
    '1:2:3:4:5:6:7:8:9',
    'fe80::1%eth0',
    '::ffff:192.168.0.1',
    '2001:db8::',
    'a:b',
    ':',
    '1.2.3.4:15002',
    'host:15002',
  ];

  it('answers isIPv6 and isIP exactly as Node does', () => {
    for (const a of addresses) {
      expect(shim.isIPv6(a), a).toBe(net.isIPv6(a));
      expect(shim.isIP(a), a).toBe(net.isIP(a));
    }
    expect(addresses.filter((a) => net.isIPv6(a)).length).toBeGreaterThanOrEqual(6);
  });

  it("is Node's net for everything else", () => {
    expect(shim.Socket).toBe(net.Socket);
    expect(shim.connect).toBe(net.connect);
    expect(shim.isIPv4).toBe(net.isIPv4);
    expect(Object.getPrototypeOf(shim)).toBe(net);
  });
});
