/**
 * Pure request-target checks. The proxy only accepts origin-form targets ("/path?query") whose
 * path cannot climb out of the upstream's prefix: no dot segments (also percent-encoded), no
 * encoded slashes or backslashes, no NUL. Anything else is a 400 before routing.
 */

export type Target =
  | { ok: true; pathname: string; search: string }
  | { ok: false; reason: string };

const MAX_TARGET = 8192;

export function parseTarget(url: string | undefined): Target {
  if (url === undefined || url.length === 0) return { ok: false, reason: 'empty request target' };
  if (url.length > MAX_TARGET) return { ok: false, reason: 'request target too long' };
  if (url.charCodeAt(0) !== 47 /* / */ || url.startsWith('//')) {
    return { ok: false, reason: 'request target must be a path starting with a single "/"' };
  }
  const q = url.indexOf('?');
  const hash = url.indexOf('#');
  if (hash !== -1) return { ok: false, reason: 'request target must not contain a fragment' };
  const pathname = q === -1 ? url : url.slice(0, q);
  const search = q === -1 ? '' : url.slice(q);
  // Fast path: nothing that could hide a dot segment, an encoded separator or a control byte.
  if (!/[%.\\\x00-\x1f\x7f]/.test(pathname)) return { ok: true, pathname, search };
  if (/[\\\x00-\x1f\x7f]/.test(pathname)) return { ok: false, reason: 'invalid character in path' };
  if (/%(2f|5c|00)/i.test(pathname)) return { ok: false, reason: 'encoded "/", "\\" or NUL in path' };
  let decoded: string;
  try {
    decoded = decodeURIComponent(pathname);
  } catch {
    return { ok: false, reason: 'malformed percent-encoding in path' };
  }
  for (const seg of decoded.split('/')) {
    if (seg === '.' || seg === '..') return { ok: false, reason: 'dot segments are not allowed in path' };
  }
  return { ok: true, pathname, search };
}
