/**
 * Pure: the normal form of a request path, where the spellings a client may use for one GitHub
 * resource meet. Cache path scopes (src/cache/rules/path-scope.ts) and consumer scopes
 * (src/pool/rules/allow.ts) compare paths in it:
 *
 *   - lower case (GitHub's owner and repository names are case-insensitive);
 *   - percent-escapes of characters that need none decoded (`hello%2Dworld` is `hello-world`);
 *   - no trailing slash (`/repos/o/r/` is `/repos/o/r`).
 */

/** A path in normal form (see above). */
export function normalPath(pathname: string): string {
  let path = pathname;
  if (path.includes('%')) path = decodeUnreserved(path);
  path = path.toLowerCase();
  while (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1);
  return path.length === 0 ? '/' : path;
}

/** Decodes the percent-escapes of unreserved characters only (RFC 3986 section 2.3); others stay as they are. */
function decodeUnreserved(path: string): string {
  return path.replace(/%([0-9A-Fa-f]{2})/g, (escape: string, hex: string) => {
    const char = String.fromCharCode(Number.parseInt(hex, 16));
    return /^[A-Za-z0-9\-._~]$/.test(char) ? char : escape.toUpperCase();
  });
}
