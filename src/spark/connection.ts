/**
 * Spark Connect connection strings: `sc://host[:port][/;key=value;…]`, or `local` for the runner's
 * own server. The parameters follow Spark's client convention (token, use_ssl, user_id, session_id,
 * user_agent); any other key travels as a gRPC header on every call. Keys are case-insensitive
 * (Airflow writes `use_ssl=True`), values may be percent-encoded.
 */
import { ConfigError, UsageError } from '../core/errors.js';
import { Secret } from '../core/secrets.js';

export const DEFAULT_PORT = 15002;

/** `--remote local`: the runner starts or reuses a server and resolves this to its address. */
export interface LocalSpec {
  readonly kind: 'local';
}

export interface RemoteSpec {
  readonly kind: 'remote';
  /** Host name or IP address; IPv6 without brackets. */
  readonly host: string;
  readonly port: number;
  readonly useSsl: boolean;
  /** Sent as `authorization: Bearer …` on every call. */
  readonly token?: Secret;
  readonly userId?: string;
  /** A UUID; the client generates one when absent. */
  readonly sessionId?: string;
  readonly userAgent?: string;
  /** Extra gRPC headers from unknown parameters (values may be credentials: never log them). */
  readonly headers: Readonly<Record<string, string>>;
}

export type ConnectionSpec = LocalSpec | RemoteSpec;

export const LOCAL: LocalSpec = Object.freeze({ kind: 'local' });

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const HEADER_KEY = /^[0-9a-z_.-]+$/;
const TRUE = new Set(['true', '1']);
const FALSE = new Set(['false', '0']);

export interface ParseOptions {
  /** Where the string came from: a command line option (usage error) or a config key (config error). */
  origin?: { kind: 'option'; name: string } | { kind: 'config'; path: string };
}

/**
 * Parse a connection string. Errors name the offending part but never repeat the string itself,
 * which may carry a token.
 */
export function parseConnectionString(text: string, options: ParseOptions = {}): ConnectionSpec {
  const origin = options.origin ?? { kind: 'config', path: 'spark.remote' };
  const fail = (message: string): never => {
    if (origin.kind === 'option') throw new UsageError(`${origin.name}: ${message}`);
    throw new ConfigError(message, { path: origin.path });
  };

  const trimmed = text.trim();
  if (trimmed.toLowerCase() === 'local') return LOCAL;
  if (!trimmed.toLowerCase().startsWith('sc://')) {
    return fail('a Spark Connect remote is "local" or starts with sc://, e.g. sc://spark.example:15002/;use_ssl=true');
  }

  const rest = trimmed.slice('sc://'.length);
  const semi = rest.indexOf(';');
  let authorityAndPath = semi === -1 ? rest : rest.slice(0, semi);
  const paramText = semi === -1 ? '' : rest.slice(semi + 1);
  if (/[?#]/.test(authorityAndPath)) return fail('sc:// remotes take parameters after "/;", not a query string or fragment');
  const slash = authorityAndPath.indexOf('/');
  if (slash !== -1) {
    if (authorityAndPath.slice(slash) !== '/') return fail('sc:// remotes have no path: parameters follow "/;"');
    authorityAndPath = authorityAndPath.slice(0, slash);
  } else if (semi !== -1) {
    return fail('parameters must follow "/;" (sc://host:port/;key=value)');
  }
  if (authorityAndPath.includes('@')) return fail('sc:// remotes carry no user info before the host; use ;token=… or ;user_id=…');

  const { host, port } = parseAuthority(authorityAndPath, fail);

  let useSsl = false;
  let token: Secret | undefined;
  let userId: string | undefined;
  let sessionId: string | undefined;
  let userAgent: string | undefined;
  const headers: Record<string, string> = {};
  const seen = new Set<string>();

  for (const part of paramText.split(';')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    if (eq <= 0) return fail(`parameter ${eq === 0 ? '(empty name)' : `"${safeKey(part)}"`} needs the form key=value`);
    const key = part.slice(0, eq).trim().toLowerCase();
    let value: string;
    try {
      value = decodeURIComponent(part.slice(eq + 1));
    } catch {
      return fail(`parameter "${safeKey(key)}" has a malformed percent-encoding`);
    }
    if (seen.has(key)) return fail(`parameter "${safeKey(key)}" is given twice`);
    seen.add(key);
    switch (key) {
      case 'token':
        if (value === '') return fail('parameter "token" is empty');
        token = new Secret(value);
        break;
      case 'use_ssl': {
        const v = value.toLowerCase();
        if (TRUE.has(v)) useSsl = true;
        else if (FALSE.has(v)) useSsl = false;
        else return fail('parameter "use_ssl" must be true or false');
        break;
      }
      case 'user_id':
        userId = value;
        break;
      case 'session_id':
        if (!UUID.test(value)) return fail('parameter "session_id" must be a UUID');
        sessionId = value.toLowerCase();
        break;
      case 'user_agent':
        if (value.length > 2048) return fail('parameter "user_agent" is longer than 2048 characters');
        userAgent = value;
        break;
      default:
        if (!HEADER_KEY.test(key) || key.startsWith('grpc-') || key === 'authorization') {
          return fail(`parameter "${safeKey(key)}" cannot be sent as a gRPC header`);
        }
        headers[key] = value;
    }
  }

  return {
    kind: 'remote',
    host,
    port,
    useSsl,
    ...(token ? { token } : {}),
    ...(userId !== undefined ? { userId } : {}),
    ...(sessionId !== undefined ? { sessionId } : {}),
    ...(userAgent !== undefined ? { userAgent } : {}),
    headers,
  };
}

function parseAuthority(text: string, fail: (m: string) => never): { host: string; port: number } {
  let host: string;
  let portText: string | undefined;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close === -1) return fail('IPv6 host is missing its closing "]"');
    host = text.slice(1, close);
    const after = text.slice(close + 1);
    if (after !== '' && !after.startsWith(':')) return fail('unexpected text after the IPv6 host');
    portText = after === '' ? undefined : after.slice(1);
    if (!/^[0-9a-f:.%a-z]+$/i.test(host) || !host.includes(':')) return fail('malformed IPv6 host');
  } else {
    const colon = text.lastIndexOf(':');
    if (colon !== -1 && text.indexOf(':') !== colon) return fail('IPv6 hosts must be written in brackets, e.g. sc://[::1]:15002');
    host = colon === -1 ? text : text.slice(0, colon);
    portText = colon === -1 ? undefined : text.slice(colon + 1);
    if (!/^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/i.test(host)) return fail(host === '' ? 'the host is missing' : 'malformed host name');
  }
  if (portText === undefined) return { host, port: DEFAULT_PORT };
  if (!/^[0-9]{1,5}$/.test(portText)) return fail('the port must be a number');
  const port = Number(portText);
  if (port < 1 || port > 65535) return fail('the port must be between 1 and 65535');
  return { host, port };
}

/** A parameter name, shortened, for error messages (a value is never shown). */
function safeKey(key: string): string {
  const name = key.split('=')[0] ?? '';
  return name.length > 40 ? `${name.slice(0, 40)}…` : name;
}

/** `host:port` as gRPC wants it (IPv6 in brackets). */
export function grpcAddress(spec: RemoteSpec): string {
  return spec.host.includes(':') ? `[${spec.host}]:${spec.port}` : `${spec.host}:${spec.port}`;
}

/** A log-safe description, e.g. `sc://host:15002 (tls, token redacted)`. Headers are not shown. */
export function describeRemote(spec: ConnectionSpec): string {
  if (spec.kind === 'local') return 'local';
  const notes = [spec.useSsl ? 'tls' : undefined, spec.token ? 'token redacted' : undefined].filter(Boolean);
  return `sc://${grpcAddress(spec)}${notes.length ? ` (${notes.join(', ')})` : ''}`;
}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}
