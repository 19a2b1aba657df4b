/**
 * Pure: which Accept values select GitHub's default JSON representation, so that they share one
 * cache entry on a GitHub upstream. GitHub answers each of these with the same JSON body and
 * Content-Type:
 *
 *   no Accept (or an empty one), `*` + `/*`, `application/json`, `application/vnd.github+json`,
 *   `application/vnd.github.v3+json`
 *
 * each also with spacing, letter case, a `charset=utf-8` or a `q` above 0 that do not change it,
 * and any list made only of them (`application/vnd.github+json, application/json`). Every other
 * value keeps its own entry: GitHub's custom media types (`.raw`, `.html`, `.diff`, `.patch`,
 * `.sha`, `.text-match+json`, `.star+json`, `.full+json`), previews, another parameter, `q=0`, or a
 * list with any other member.
 *
 * An equivalent value is keyed as a request without Accept, and the cached exchange sends none
 * upstream in its place (GitHub's default): one spelling for the upstream, so that an entry fetched
 * for one spelling is revalidated with the validators it was given.
 */

const EQUIVALENT_TYPES = new Set(['*/*', 'application/json', 'application/vnd.github+json', 'application/vnd.github.v3+json']);

/** Only this much of an Accept is read for equivalence; a longer one keeps its own entry. */
const MAX_ACCEPT_CHARS = 512;

/** A parameter that does not change the representation: a charset of UTF-8 (JSON's), a weight above 0. */
function neutralParameter(text: string): boolean {
  const eq = text.indexOf('=');
  if (eq <= 0) return false;
  const name = text.slice(0, eq).trim().toLowerCase();
  let value = text.slice(eq + 1).trim();
  if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
  if (name === 'charset') return value.toLowerCase() === 'utf-8';
  if (name === 'q') return /^(?:0\.\d{0,3}|1(?:\.0{0,3})?|0)$/.test(value) && Number(value) > 0;
  return false;
}

/** One member of an Accept list: an equivalent type with neutral parameters only. */
function equivalentMember(member: string): boolean {
  const [type = '', ...parameters] = member.split(';');
  if (!EQUIVALENT_TYPES.has(type.trim().toLowerCase())) return false;
  return parameters.every(neutralParameter);
}

/** Whether an Accept value selects GitHub's default JSON representation (absent: yes). */
export function isEquivalentAccept(accept: string | undefined): boolean {
  if (accept === undefined || EQUIVALENT_TYPES.has(accept)) return true;
  if (accept.length > MAX_ACCEPT_CHARS) return false;
  // Empty members are skipped: an Accept of only commas and spaces states no preference, as none.
  for (const member of accept.split(',')) if (member.trim().length > 0 && !equivalentMember(member)) return false;
  return true;
}

/** The Accept part of a cache key: "" for every equivalent value on an upstream that shares them, else the value as sent. */
export function acceptKeyPart(accept: string | undefined, shares: boolean): string | undefined {
  if (!shares) return accept;
  return isEquivalentAccept(accept) ? undefined : accept;
}

/**
 * Whether an upstream is GitHub's REST API, whose equivalent Accept values share an entry: one with
 * the token pool or GraphQL, api.github.com, or Enterprise Server's `/api/v3`. Another API may
 * answer `*` + `/*` and `application/json` differently: it keeps one entry per value.
 */
export function sharesEquivalentAccept(cfg: { readonly url: string; readonly token_pool: boolean; readonly graphql: boolean }): boolean {
  if (cfg.token_pool || cfg.graphql) return true;
  const url = new URL(cfg.url);
  return url.hostname.toLowerCase() === 'api.github.com' || /\/api\/v3\/?$/.test(url.pathname);
}
