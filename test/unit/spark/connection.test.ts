import { describe, expect, it } from 'vitest';
import { ConfigError, UsageError } from '../../../src/core/errors.js';
import { Secret } from '../../../src/core/secrets.js';
import { DEFAULT_PORT, describeRemote, grpcAddress, parseConnectionString, type RemoteSpec } from '../../../src/spark/connection.js';

function remote(text: string): RemoteSpec {
  const spec = parseConnectionString(text);
  if (spec.kind !== 'remote') throw new Error('expected a remote');
  return spec;
}

describe('parseConnectionString', () => {
  it('reads host and the default port', () => {
    expect(remote('sc://spark.example')).toMatchObject({ host: 'spark.example', port: DEFAULT_PORT, useSsl: false, headers: {} });
    expect(remote('sc://spark.example:443/')).toMatchObject({ host: 'spark.example', port: 443 });
  });

  it('reads the parameters Spark clients and Airflow write', () => {
    const spec = remote(
      'sc://spark.example:15002/;token=abc%3Bdef;use_ssl=True;user_id=etl;session_id=0A6C2D2E-3C5B-4A53-9A1D-3F2B1C0D9E8F;user_agent=airflow;x-tenant=acme',
    );
    expect(spec.useSsl).toBe(true);
    expect(spec.token).toBeInstanceOf(Secret);
    expect(spec.token?.reveal()).toBe('abc;def');
    expect(spec.userId).toBe('etl');
    expect(spec.sessionId).toBe('0a6c2d2e-3c5b-4a53-9a1d-3f2b1c0d9e8f');
    expect(spec.userAgent).toBe('airflow');
    expect(spec.headers).toEqual({ 'x-tenant': 'acme' });
  });

  it('accepts the boolean spellings of use_ssl and case-insensitive keys', () => {
    for (const v of ['true', 'True', '1']) expect(remote(`sc://h/;use_ssl=${v}`).useSsl).toBe(true);
    for (const v of ['false', 'False', '0']) expect(remote(`sc://h/;USE_SSL=${v}`).useSsl).toBe(false);
    expect(remote('sc://h/;Token=t0ken1').token?.reveal()).toBe('t0ken1');
  });

  it('reads bracketed IPv6 hosts', () => {
    const spec = remote('sc://[::1]:15010/;use_ssl=false');
    expect(spec).toMatchObject({ host: '::1', port: 15010 });
    expect(grpcAddress(spec)).toBe('[::1]:15010');
    expect(remote('sc://[fe80::1]').port).toBe(DEFAULT_PORT);
  });

  it('recognises local', () => {
    expect(parseConnectionString('local')).toEqual({ kind: 'local' });
    expect(parseConnectionString(' LOCAL ')).toEqual({ kind: 'local' });
  });

  it.each([
    ['http://spark:15002', /starts with sc:\/\//],
    ['sc://', /host is missing/],
    ['sc://:15002', /host is missing/],
    ['sc://h:port', /port must be a number/],
    ['sc://h:70000', /between 1 and 65535/],
    ['sc://h/path;token=x', /no path/],
    ['sc://h;token=x', /follow "\/;"/],
    ['sc://h?token=x', /not a query string/],
    ['sc://::1:15002', /IPv6 hosts must be written in brackets/],
    ['sc://[::1:15002', /closing "\]"/],
    ['sc://h/;use_ssl=yes', /use_ssl/],
    ['sc://h/;session_id=42', /UUID/],
    ['sc://h/;novalue', /key=value/],
    ['sc://h/;token=a;token=b', /twice/],
    ['sc://h/;token=', /empty/],
    ['sc://h/;Bad Key=1', /gRPC header/],
    ['sc://h/;authorization=Bearer%20x', /gRPC header/],
    ['sc://user:pw@h', /no user info/],
  ])('rejects %s', (text, message) => {
    expect(() => parseConnectionString(text)).toThrow(message);
  });

  it('raises a config error by default and a usage error for command line options', () => {
    expect(() => parseConnectionString('sc://h:x')).toThrow(ConfigError);
    try {
      parseConnectionString('sc://h:x', { origin: { kind: 'config', path: 'spark.remote' } });
    } catch (e) {
      expect((e as ConfigError).issues[0]?.path).toBe('spark.remote');
    }
    expect(() => parseConnectionString('sc://h:x', { origin: { kind: 'option', name: '--remote' } })).toThrow(UsageError);
    expect(() => parseConnectionString('sc://h:x', { origin: { kind: 'option', name: '--remote' } })).toThrow(/^--remote: /);
  });

  it('never repeats a token in its errors', () => {
    const token = 'sup3r-s3cret-t0ken';
    for (const text of [`sc://h:x/;token=${token}`, `sc://h/;token=${token};use_ssl=maybe`, `sc://h/;token=${token};token=${token}`]) {
      let message = '';
      try {
        parseConnectionString(text);
      } catch (e) {
        message = (e as Error).message;
      }
      expect(message).not.toBe('');
      expect(message).not.toContain(token);
    }
  });
});

describe('describeRemote', () => {
  it('is log safe', () => {
    const spec = remote('sc://spark.example:15002/;token=very-secret;x-api-key=also-secret');
    const text = describeRemote(spec);
    expect(text).toBe('sc://spark.example:15002 (token redacted)');
    expect(JSON.stringify(spec)).not.toContain('very-secret');
  });

  it('mentions TLS and IPv6 brackets', () => {
    expect(describeRemote(remote('sc://[::1]/;use_ssl=true'))).toBe('sc://[::1]:15002 (tls)');
    expect(describeRemote(parseConnectionString('local'))).toBe('local');
  });
});
