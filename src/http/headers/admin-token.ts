/**
 * Pure: whether a request to the admin port may have what it asks for, given admin.token. With a
 * token configured, every path but the open ones (the status page's HTML, /healthz, /readyz,
 * /metrics: probes and Prometheus need no secret) needs `Authorization: Bearer <admin.token>`.
 * The presented token is compared in constant time (SHA-256 digests of the same length, compared
 * with timingSafeEqual: neither its length nor a common prefix shows). A token in the query is
 * never taken (a query ends up in logs and browser history), and no message repeats what was sent.
 */
import { hash, timingSafeEqual } from 'node:crypto';

/** The paths served without the token. */
export const OPEN_ADMIN_PATHS: ReadonlySet<string> = new Set(['/', '/healthz', '/readyz', '/metrics']);

/** What the admin port checks a request against: the token's digest; undefined when no token is configured. */
export interface AdminTokenRule {
  readonly digest: Buffer;
}

export interface AdminTokenRefusal {
  readonly status: 401;
  readonly message: string;
  readonly headers: Readonly<Record<string, string>>;
}

const digestOf = (text: string): Buffer => hash('sha256', text, 'buffer');

/** The rule of a configured admin.token (null: every path is open, as on a loopback admin port without one). */
export function adminTokenRule(token: string | null | undefined): AdminTokenRule | undefined {
  return token === null || token === undefined ? undefined : { digest: digestOf(token) };
}

/** A query parameter that looks like a credential (`token`, `access_token`, `admin_token`, `key`). */
const TOKEN_IN_QUERY = /[?&](?:[a-z_]*token|key|bearer)=/i;

function refusal(message: string, invalid: boolean): AdminTokenRefusal {
  return {
    status: 401,
    message,
    headers: { 'www-authenticate': invalid ? 'Bearer realm="etagere admin", error="invalid_token"' : 'Bearer realm="etagere admin"' },
  };
}

/**
 * Why a request is refused (401), or undefined when it may go on. `target` is the request target
 * as received (path and query), `authorization` its Authorization header.
 */
export function adminTokenRefusal(
  rule: AdminTokenRule | undefined,
  target: string,
  authorization: string | undefined,
): AdminTokenRefusal | undefined {
  if (rule === undefined) return undefined;
  const mark = target.indexOf('?');
  const path = mark === -1 ? target : target.slice(0, mark);
  if (OPEN_ADMIN_PATHS.has(path)) return undefined;
  const words = authorization?.trim().split(/\s+/) ?? [];
  if (words.length === 0 || words[0] === '') {
    return refusal(
      mark !== -1 && TOKEN_IN_QUERY.test(target.slice(mark))
        ? 'Requires the admin token in Authorization: Bearer, not in the query'
        : 'Requires the admin token: send Authorization: Bearer <admin.token>',
      false,
    );
  }
  if (words.length !== 2 || words[0]!.toLowerCase() !== 'bearer')
    return refusal('Requires the admin token as Authorization: Bearer <admin.token>', false);
  return timingSafeEqual(digestOf(words[1]!), rule.digest) ? undefined : refusal('Bad admin token', true);
}
