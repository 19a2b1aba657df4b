/**
 * Pure: a config as `etagere check-config` prints it, with every secret value masked and every name
 * kept: pool token and consumer key values, App private keys, the webhook and partition secrets, the admin token,
 * and a URL's password (its user when it has no password: a token as user name) and query values.
 */
import type { Config } from './schema.js';

export const MASK = '<masked>';
/** Inside a URL (no percent-encoding needed). */
const URL_MASK = '***';

/** Keys whose string value is a secret wherever they appear. */
const SECRET_KEYS = new Set(['value', 'private_key', 'secret', 'partition_secret', 'token']);

/**
 * A URL's password (its user when it has no password) and query values masked; the text unchanged
 * when it holds neither (or is not a URL). Every URL a log line carries is shown this way too.
 */
export function maskedUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return text;
  }
  if (url.username === '' && url.password === '' && url.search === '') return text;
  if (url.password !== '') url.password = URL_MASK;
  else if (url.username !== '') url.username = URL_MASK;
  for (const name of new Set(url.searchParams.keys())) url.searchParams.set(name, URL_MASK);
  return url.toString();
}

function mask(value: unknown, key: string | undefined): unknown {
  if (typeof value === 'string') {
    if (key !== undefined && SECRET_KEYS.has(key)) return MASK;
    return /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? maskedUrl(value) : value;
  }
  if (Array.isArray(value)) return value.map((item) => mask(item, undefined));
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([name, item]) => [name, mask(item, name)]));
  return value;
}

/** A deep copy of `config` with its secrets masked. */
export function maskedConfig(config: Config): Record<string, unknown> {
  return mask(config, undefined) as Record<string, unknown>;
}
