/**
 * Pure: path scopes, what a webhook delivery or a purge makes stale. A scope is one upstream and
 * either one exact path (every query, partition and representation stored under it) or a path
 * prefix (that path and every path below it, on whole segments). Paths are compared in a normal
 * form, so that the spellings a client may use for one GitHub resource meet:
 *
 *   - lower case (GitHub's owner and repository names are case-insensitive);
 *   - percent-escapes of characters that need none decoded (`hello%2Dworld` is `hello-world`);
 *   - no trailing slash (`/repos/o/r/` is `/repos/o/r`).
 *
 * Folding more spellings together than the upstream does only marks more entries stale than
 * needed (an extra revalidation, a free 304 on GitHub), never fewer.
 *
 * `normalPath` lives in src/http/target.ts (consumer scopes use it too).
 *
 * A scope's id, the form the cache remembers, publishes and persists:  <upstream> \n <x|p> \n <path>
 */

import { normalPath } from '../../http/target.js';

export { normalPath };

export interface PathScope {
  readonly upstream: string;
  /** A path in normal form (`normalPath`). */
  readonly path: string;
  /** true: the path and everything below it; false: that exact path. */
  readonly prefix: boolean;
}

const EXACT = 'x';
const PREFIX = 'p';

export function scopeId(scope: PathScope): string {
  return `${scope.upstream}\n${scope.prefix ? PREFIX : EXACT}\n${scope.path}`;
}

/** The scope an id names, or undefined for a malformed one (a notice from another version, say). */
export function parseScopeId(id: string): PathScope | undefined {
  const first = id.indexOf('\n');
  if (first <= 0 || id.charAt(first + 2) !== '\n') return undefined;
  const kind = id.charAt(first + 1);
  const path = id.slice(first + 3);
  if ((kind !== EXACT && kind !== PREFIX) || !path.startsWith('/')) return undefined;
  return { upstream: id.slice(0, first), path, prefix: kind === PREFIX };
}

/** The upstream and path a cache key names (key.ts: "<upstream>\n<path>\n..."), the path in normal form. */
export function keyPath(key: string): { upstream: string; path: string } | undefined {
  const first = key.indexOf('\n');
  if (first <= 0) return undefined;
  const second = key.indexOf('\n', first + 1);
  const pathname = second === -1 ? key.slice(first + 1) : key.slice(first + 1, second);
  if (!pathname.startsWith('/')) return undefined;
  return { upstream: key.slice(0, first), path: normalPath(pathname) };
}

/** The path's segments after the leading slash ("/" has none). */
export function segmentsOf(path: string): string[] {
  return path === '/' ? [] : path.slice(1).split('/');
}

/**
 * The ids of every scope that covers `path` (normal form) on `upstream`: the exact scope of the
 * path, and the prefix scopes of the path and of each of its ancestors up to "/".
 */
export function coveringScopeIds(upstream: string, path: string): string[] {
  const ids = [`${upstream}\n${EXACT}\n${path}`, `${upstream}\n${PREFIX}\n/`];
  let end = path.indexOf('/', 1);
  while (end !== -1) {
    ids.push(`${upstream}\n${PREFIX}\n${path.slice(0, end)}`);
    end = path.indexOf('/', end + 1);
  }
  if (path !== '/') ids.push(`${upstream}\n${PREFIX}\n${path}`);
  return ids;
}

/** Whether `path` (normal form) is in `scope`. */
export function inScope(scope: Pick<PathScope, 'path' | 'prefix'>, path: string): boolean {
  if (path === scope.path) return true;
  if (!scope.prefix) return false;
  return scope.path === '/' || (path.startsWith(scope.path) && path.charCodeAt(scope.path.length) === 47); /* / */
}
