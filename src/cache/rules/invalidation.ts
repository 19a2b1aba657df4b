/**
 * Pure: what an answer to a passed-through method invalidates (RFC 9111 section 4.4).
 *
 * "A cache MUST invalidate the target URI when it receives a non-error status code in response to
 * an unsafe request method (including methods whose safety is unknown)": any method but GET, HEAD,
 * OPTIONS and TRACE (the safe methods of RFC 9110 section 9.2.1), with a 2xx or 3xx. The URIs in
 * `Location` and `Content-Location` are invalidated too, when their origin is the target URI's: the
 * upstream's (a relative reference resolves against the URI the upstream was asked for), or the
 * proxy's own public base as the client sees it. Another origin never is ("This helps prevent
 * denial-of-service attacks").
 *
 * Paths are the client's (the cache's view): an upstream path loses the upstream's base path and
 * gets the route prefix back when the route strips it.
 */

/** The safe methods of RFC 9110 section 9.2.1: the only ones whose answers invalidate nothing. */
const SAFE = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE']);

/** Whether an answer with `status` to `method` invalidates (method names are case-sensitive: `get` is not GET). */
export function invalidates(method: string, status: number): boolean {
  return !SAFE.has(method) && status >= 200 && status < 400;
}

/** How an upstream's URLs map to the client's paths. */
export interface PathMapping {
  /** The upstream's origin, e.g. "https://api.example.com". */
  readonly upstreamOrigin: string;
  /** The upstream URL's base path without trailing slash ("" or "/api/v3"). */
  readonly basePrefix: string;
  /** The route prefix the route strips ("" when it strips none). */
  readonly strippedPrefix: string;
  /** The proxy's public base for this request (origin, maybe a path), when known. */
  readonly publicBase: string | undefined;
}

export interface InvalidationInput {
  /** The client's path of the request (no query). */
  readonly pathname: string;
  /** The path (with query) the upstream was asked for. */
  readonly upstreamPath: string;
  readonly location: string | undefined;
  readonly contentLocation: string | undefined;
}

function parse(reference: string, base: string): URL | undefined {
  try {
    return new URL(reference.trim(), base);
  } catch {
    return undefined;
  }
}

/** `path` with `prefix` (a whole number of segments) taken off, or undefined when it is not under it. */
function under(path: string, prefix: string): string | undefined {
  if (prefix === '') return path;
  if (path === prefix) return '/';
  return path.startsWith(`${prefix}/`) ? path.slice(prefix.length) : undefined;
}

/** The client paths a `Location` or `Content-Location` value names, on the target URI's origin only. */
function clientPaths(reference: string, input: InvalidationInput, mapping: PathMapping): string[] {
  const upstreamUrl = parse(reference, mapping.upstreamOrigin + input.upstreamPath);
  if (upstreamUrl !== undefined && upstreamUrl.origin === mapping.upstreamOrigin) {
    const rest = under(upstreamUrl.pathname, mapping.basePrefix);
    if (rest === undefined) return [];
    if (mapping.strippedPrefix === '') return [rest];
    // The route maps both `/prefix` and `/prefix/` to the upstream's `/`.
    return rest === '/' ? [mapping.strippedPrefix, `${mapping.strippedPrefix}/`] : [mapping.strippedPrefix + rest];
  }
  if (mapping.publicBase === undefined) return [];
  const base = parse(mapping.publicBase, 'http://invalid.invalid');
  const proxyUrl = parse(reference, mapping.publicBase + input.pathname);
  if (base === undefined || proxyUrl === undefined || proxyUrl.origin !== base.origin) return [];
  const rest = under(proxyUrl.pathname, base.pathname.replace(/\/+$/, ''));
  return rest === undefined ? [] : [rest];
}

/** Every client path the answer invalidates: the target's, then those `Location` and `Content-Location` name. */
export function invalidatedPaths(input: InvalidationInput, mapping: PathMapping): string[] {
  const paths = new Set<string>([input.pathname]);
  for (const reference of [input.location, input.contentLocation]) {
    if (reference === undefined || reference.trim() === '') continue;
    for (const path of clientPaths(reference, input, mapping)) paths.add(path);
  }
  return [...paths];
}
