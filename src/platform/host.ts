/**
 * Pure rules about host names: which listen addresses are loopback (a pool served anywhere else
 * needs consumer keys or `pool.open`), and which Host headers the admin port answers (DNS
 * rebinding: a page on another site that resolves its name to 127.0.0.1 still sends its own name).
 */

const IPV4_LOOPBACK = /^127(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

/** Whether a listen address (listen.host) only accepts connections from this machine. */
export function isLoopbackAddress(host: string): boolean {
  const lower = host.trim().toLowerCase();
  const bare = lower.startsWith('[') && lower.endsWith(']') ? lower.slice(1, -1) : lower;
  if (bare === 'localhost' || bare === '::1' || bare === '0:0:0:0:0:0:0:1') return true;
  if (IPV4_LOOPBACK.test(bare)) return true;
  return bare.startsWith('::ffff:') && IPV4_LOOPBACK.test(bare.slice(7));
}

/** The loopback names the admin port always answers to (with any port). */
const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** The host part of a Host header value ("name", "name:port", "[v6]", "[v6]:port"), lower-case; undefined when malformed. */
export function hostOf(header: string): string | undefined {
  const value = header.trim().toLowerCase();
  if (value.startsWith('[')) {
    const end = value.indexOf(']');
    if (end === -1) return undefined;
    const rest = value.slice(end + 1);
    return rest === '' || /^:\d{1,5}$/.test(rest) ? value.slice(0, end + 1) : undefined;
  }
  const match = /^([a-z0-9.-]+)(?::\d{1,5})?$/.exec(value);
  return match === null ? undefined : match[1];
}

/** An address as a Host header names it: IPv6 in brackets, IPv4-mapped IPv6 as plain IPv4. */
function asHost(address: string): string {
  const lower = address.toLowerCase();
  if (lower.startsWith('::ffff:') && lower.indexOf('.') !== -1) return lower.slice(7);
  return lower.indexOf(':') === -1 ? lower : `[${lower}]`;
}

/**
 * Whether the admin port serves a request with this Host header (any port): a loopback name
 * (127.0.0.1, localhost, [::1]), one of `allowed` (admin.allowed_hosts, lower-case, without port),
 * or the very address the connection arrived on (`localAddress`: a probe or a scraper that
 * addresses the pod by its IP; a rebinding page always sends its own name, never an address).
 * A missing or malformed Host is refused.
 */
export function adminHostAllowed(header: string | undefined, allowed: ReadonlySet<string>, localAddress?: string): boolean {
  if (header === undefined) return false;
  const host = hostOf(header);
  if (host === undefined) return false;
  if (LOOPBACK_HOSTS.has(host) || allowed.has(host)) return true;
  return localAddress !== undefined && host === asHost(localAddress);
}

/** Whether a URL may be trusted to serve keys (an OIDC issuer, its JWKS): https, or http on a loopback host. */
export function secureOrLoopbackUrl(url: string): boolean {
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'https:' || (parsed.protocol === 'http:' && isLoopbackAddress(parsed.hostname));
  } catch {
    return false;
  }
}
