/**
 * Pure cache-key rules. A key names one representation that one credential partition may see:
 *
 *   <upstream> \n <path> \n <sorted query> \n <accept> \n <api version> \n <partition> [\n <selecting headers>]
 *
 * - GET and HEAD share keys (HEAD is answered from the GET entry).
 * - The query is normalised: parameters sorted by (decoded) name, empty ones dropped, so the order
 *   of different names does not matter. The sort is stable: repeated names keep their relative
 *   order, because the upstream reads them in order (the last value wins, or a list).
 * - Accept and X-GitHub-Api-Version always select the representation (GitHub varies on the
 *   version without listing it in Vary).
 * - Cookie, X-GitHub-OTP and X-Requested-With, which GitHub lists in Vary, are folded in (hashed)
 *   only when present. Any other header a stored response names in Vary is checked against the
 *   entry at lookup (see `varyMatches`).
 * - The partition separates credentials: see `partitionOf`. Two requests that could receive
 *   different bodies never share a key.
 * - On GitHub, the Accept values that select its default JSON share one key (`acceptKeyPart`).
 */
import { createHmac } from 'node:crypto';
import { createBoundedMemo } from '../../platform/bytes.js';
import { languageSelects, normaliseSelecting } from './vary-normalise.js';

export const ANONYMOUS = 'anon';
export const POOL = 'pool';

export interface KeyInput {
  upstream: string;
  pathname: string;
  /** The raw query including "?", or "". */
  search: string;
  accept: string | undefined;
  apiVersion: string | undefined;
  partition: string;
  /** Keyed digest of KEYED_VARY_HEADERS values when any is present (Partitioner.selectingDigest). */
  selecting?: string | undefined;
}

/** Headers GitHub lists in Vary that clients seldom send: part of the key when present. */
export const KEYED_VARY_HEADERS = ['cookie', 'x-github-otp', 'x-requested-with'] as const;

/**
 * Vary names the key already accounts for: Accept and the partition (Authorization) are in the key;
 * Accept-Encoding is neutral because cached fetches always ask the upstream for gzip and every
 * client is served from that one entry, decoded when it does not take gzip (src/cache/store/entry-form.ts).
 */
export const VARY_COVERED = new Set(['accept', 'authorization', 'accept-encoding', 'x-github-api-version', ...KEYED_VARY_HEADERS]);

export function normalizeQuery(search: string): string {
  if (search.length <= 1) return '';
  const body = search.charCodeAt(0) === 63 /* ? */ ? search.slice(1) : search;
  if (body.indexOf('&') === -1) return body.length === 0 ? '' : body;
  const parts = body.split('&').filter((part) => part.length > 0);
  const names = parts.map(paramName);
  // Insertion sort by name (queries have a handful of parameters): stable, so equal names keep
  // the order the client gave them.
  for (let index = 1; index < parts.length; index++) {
    const part = parts[index]!;
    const name = names[index]!;
    let at = index - 1;
    for (; at >= 0 && names[at]! > name; at--) {
      parts[at + 1] = parts[at]!;
      names[at + 1] = names[at]!;
    }
    parts[at + 1] = part;
    names[at + 1] = name;
  }
  return parts.join('&');
}

/**
 * A parameter's name as the upstream reads it: percent-decoded, "+" as a space. A name that does
 * not decode is compared as it is (so it keeps its place among its own spellings).
 */
function paramName(part: string): string {
  const eq = part.indexOf('=');
  const raw = eq === -1 ? part : part.slice(0, eq);
  if (raw.indexOf('%') === -1 && raw.indexOf('+') === -1) return raw;
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    return raw;
  }
}

export function cacheKey(input: KeyInput): string {
  const key = `${input.upstream}\n${input.pathname}\n${normalizeQuery(input.search)}\n${input.accept ?? ''}\n${input.apiVersion ?? ''}\n${input.partition}`;
  return input.selecting === undefined ? key : `${key}\n${input.selecting}`;
}

/**
 * A key around its partition: `cacheKey(input)` is `head + input.partition + tail`, so the keys of
 * one request under several partitions (non-equivalent pool tokens) cost a concatenation each.
 */
export function keyAround(input: Omit<KeyInput, 'partition'>): { head: string; tail: string } {
  return {
    head: `${input.upstream}\n${input.pathname}\n${normalizeQuery(input.search)}\n${input.accept ?? ''}\n${input.apiVersion ?? ''}\n`,
    tail: input.selecting === undefined ? '' : `\n${input.selecting}`,
  };
}

/** The path part of a key, for invalidation after unsafe methods (RFC 9111 section 4.4). */
export function pathScope(upstream: string, pathname: string): string {
  return `${upstream}\n${pathname}`;
}

export interface Partitioner {
  /**
   * The partition for a request's credential: ANONYMOUS without one, else "c:" plus a keyed hash
   * (HMAC-SHA256 with a secret) of the exact Authorization value, so the raw token never becomes
   * part of a key, a log line or a Redis key.
   */
  partitionOf(authorization: string | undefined): string;
  /** A short, non-reversible id of a credential, for logs and the entry's `fetchedBy`. */
  credentialId(authorization: string): string;
  /** Keyed digest of the KEYED_VARY_HEADERS a request carries, or undefined when it has none. */
  selectingDigest(header: (name: string) => string | undefined): string | undefined;
  /** Replaces the secret (replicas agreeing on one through Redis at start-up). */
  rekey(secret: string | Buffer): void;
  /** Bytes the credential -> partition memo holds (bounded by PARTITION_MEMO_BYTES). */
  readonly memoBytes: number;
}

/** Bound of the credential -> partition memo; an HMAC is about 2 µs, a memo hit 0.02 µs. */
export const PARTITION_MEMO_BYTES = 2 * 1024 * 1024;
/** Longer Authorization values are hashed every time rather than kept (real tokens are far shorter). */
const PARTITION_MEMO_KEY_CHARS = 2048;

export function createPartitioner(initialSecret: string | Buffer, memoBytes = PARTITION_MEMO_BYTES): Partitioner {
  const memo = createBoundedMemo(memoBytes, PARTITION_MEMO_KEY_CHARS);
  let secret = initialSecret;
  const hmac = (value: string): string => createHmac('sha256', secret).update(value).digest('base64url').slice(0, 22);
  return {
    partitionOf(authorization) {
      if (authorization === undefined) return ANONYMOUS;
      const value = authorization.trim();
      if (value.length === 0) return ANONYMOUS;
      let partition = memo.get(value);
      if (partition === undefined) {
        partition = `c:${hmac(value)}`;
        memo.set(value, partition);
      }
      return partition;
    },
    credentialId(authorization) {
      return hmac(`id:${authorization.trim()}`).slice(0, 8);
    },
    selectingDigest(header) {
      let text: string | undefined;
      for (const name of KEYED_VARY_HEADERS) {
        const value = header(name);
        if (value !== undefined) text = `${text ?? ''}${name}:${value}\n`;
      }
      return text === undefined ? undefined : hmac(`vary:${text}`);
    },
    rekey(next) {
      secret = next;
      memo.clear();
    },
    get memoBytes() {
      return memo.bytes;
    },
  };
}

/**
 * Request-header values that a stored Vary names, beyond what the key covers; with `normalise`
 * (`rfc9111`), in their normal form (vary-normalise.ts). Returns undefined when Vary is "*" (the
 * response can never be reused).
 */
export function varySelection(
  vary: string | undefined,
  requestHeader: (name: string) => string | undefined,
  normalise = false,
): Record<string, string> | null | undefined {
  if (vary === undefined || vary.length === 0) return null;
  let out: Record<string, string> | null = null;
  for (const raw of vary.split(',')) {
    const name = raw.trim().toLowerCase();
    if (name.length === 0 || VARY_COVERED.has(name)) continue;
    if (name === '*') return undefined;
    out ??= {};
    const value = requestHeader(name) ?? '';
    out[name] = normalise ? normaliseSelecting(name, value) : value;
  }
  return out;
}

/**
 * Whether a request matches the Vary selection stored with an entry. With `normalise`
 * (`rfc9111`), values are compared in their normal form, and an Accept-Language also matches a
 * stored response in the one language it prefers (`contentLanguage`, read only then).
 */
export function varyMatches(
  stored: Readonly<Record<string, string>> | null,
  requestHeader: (name: string) => string | undefined,
  normalise = false,
  contentLanguage?: () => string | undefined,
): boolean {
  if (stored === null) return true;
  for (const name in stored) {
    const value = requestHeader(name) ?? '';
    if (value === stored[name]) continue;
    if (!normalise) return false;
    if (normaliseSelecting(name, value) === stored[name]) continue;
    if (name === 'accept-language' && contentLanguage !== undefined && languageSelects(value, contentLanguage())) continue;
    return false;
  }
  return true;
}

/*
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
