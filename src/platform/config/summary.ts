/**
 * Pure: what a proxy runs with, as the fields of its start-up line ("etagere listening"). Names
 * and addresses only: URLs lose their credentials, query and fragment; tokens are counted, never
 * shown.
 */
import { maskedUrl } from './masked.js';
import type { Config } from './schema.js';

/** A URL without its user, password, query or fragment; the text unchanged when it is not a URL. */
export function withoutCredentials(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return '(not a URL)';
  }
  parsed.username = '';
  parsed.password = '';
  parsed.search = '';
  parsed.hash = '';
  const text = parsed.toString();
  // "https://api.github.com/" reads better without the root path's slash.
  return parsed.pathname === '/' && !url.endsWith('/') ? text.slice(0, -1) : text;
}

export interface StartupSummary {
  upstreams: string[];
  pool: string;
  redis: string;
  public_url: string;
  workers: number | 'auto';
  /** The webhook receiver: its path, or off (never the secret). */
  webhooks: string;
}

/** `N pool tokens`, and each GitHub App by name with its installations (`all` or their count). */
function poolSummary(config: Config): string {
  const tokenCount = config.pool.tokens.length;
  const apps = config.pool.apps.map(
    (app) =>
      `GitHub App ${app.name} (${app.installations === 'all' ? 'all installations' : `${app.installations.length} installation${app.installations.length === 1 ? '' : 's'}`})`,
  );
  if (tokenCount === 0 && apps.length === 0) return 'anonymous (no pool tokens)';
  const tokens = tokenCount === 0 ? [] : [`${tokenCount} pool token${tokenCount === 1 ? '' : 's'}`];
  return [...tokens, ...apps].join(' + ');
}

export function startupSummary(config: Config): StartupSummary {
  const redis =
    config.redis.cluster !== null
      ? `cluster (${config.redis.cluster.length} seed node${config.redis.cluster.length === 1 ? '' : 's'})`
      : config.redis.url !== null
        ? withoutCredentials(config.redis.url)
        : 'none (L1 cache only)';
  return {
    upstreams: config.upstreams.map((upstream) => `${upstream.name} ${upstream.prefix} -> ${withoutCredentials(upstream.url)}`),
    pool: poolSummary(config),
    redis,
    public_url: config.public_url === null ? 'none (from each request)' : maskedUrl(config.public_url),
    workers: config.workers,
    webhooks: config.webhooks.secret === null ? 'off (no secret)' : `on at ${config.webhooks.path}`,
  };
}
