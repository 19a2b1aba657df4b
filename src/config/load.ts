/**
 * Loads the configuration: a YAML file (optional), then environment overrides, then zod validation.
 * This is the only module that reads process.env. Errors name the offending key.
 */
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { configSchema, type Config } from './schema.js';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Environment variables that override the file. Documented in the README. */
export const ENV_VARS = {
  ETAGERE_CONFIG: 'path of the YAML config file (overridden by --config)',
  PORT: 'listen.port',
  HOST: 'listen.host',
  ADMIN_PORT: 'admin.port',
  ADMIN_HOST: 'admin.host',
  PUBLIC_URL: 'public_url',
  REDIS_URL: 'redis.url',
  ETAGERE_TOKENS: 'tokens (comma-separated)',
  UPSTREAM_URL: "upstreams[0].url (the default upstream's url)",
  LOG_LEVEL: 'log.level',
  ETAGERE_PARTITION_SECRET: 'cache.partition_secret',
} as const;

type Env = Readonly<Record<string, string | undefined>>;
type Raw = Record<string, unknown>;

function obj(parent: Raw, key: string): Raw {
  const v = parent[key];
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) return v as Raw;
  const created: Raw = {};
  parent[key] = created;
  return created;
}

function intFromEnv(name: string, value: string): number | string {
  // Keep the raw string when it is not an integer so zod reports it against the key.
  return /^\d+$/.test(value.trim()) ? Number(value.trim()) : value;
}

/** Applies environment overrides onto a raw (unvalidated) config object, in place. */
export function applyEnv(raw: Raw, env: Env): Raw {
  const set = (v: string | undefined, fn: (value: string) => void): void => {
    if (v !== undefined && v !== '') fn(v);
  };
  set(env.PORT, (v) => (obj(raw, 'listen').port = intFromEnv('PORT', v)));
  set(env.HOST, (v) => (obj(raw, 'listen').host = v));
  set(env.ADMIN_PORT, (v) => (obj(raw, 'admin').port = intFromEnv('ADMIN_PORT', v)));
  set(env.ADMIN_HOST, (v) => (obj(raw, 'admin').host = v));
  set(env.PUBLIC_URL, (v) => (raw.public_url = v));
  set(env.REDIS_URL, (v) => (obj(raw, 'redis').url = v));
  set(env.LOG_LEVEL, (v) => (obj(raw, 'log').level = v));
  set(env.ETAGERE_PARTITION_SECRET, (v) => (obj(raw, 'cache').partition_secret = v));
  set(env.ETAGERE_TOKENS, (v) => {
    raw.tokens = v
      .split(',')
      .map((t) => t.trim())
      .filter((t) => t.length > 0);
  });
  set(env.UPSTREAM_URL, (v) => {
    const list = raw.upstreams;
    if (Array.isArray(list) && list.length > 0 && list[0] !== null && typeof list[0] === 'object') {
      (list[0] as Raw).url = v;
    } else {
      raw.upstreams = [{ name: 'github', prefix: '/', url: v }];
    }
  });
  return raw;
}

function describePath(path: ReadonlyArray<PropertyKey>): string {
  if (path.length === 0) return '(root)';
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
}

/** Validates a raw object; throws ConfigError listing every bad key. */
export function parseConfig(raw: unknown, source = 'config'): Config {
  const result = configSchema.safeParse(raw);
  if (result.success) return result.data;
  const lines = result.error.issues.map((i) => `  ${describePath(i.path)}: ${i.message}`);
  throw new ConfigError(`invalid ${source}:\n${lines.join('\n')}`);
}

export interface LoadOptions {
  /** Config file path; falls back to ETAGERE_CONFIG, then to no file (built-in defaults). */
  file?: string | undefined;
  env?: Env;
}

/** The built-in upstream used when neither file nor env names one: GitHub, LRU only. */
const DEFAULT_UPSTREAMS = [{ name: 'github', prefix: '/', url: 'https://api.github.com' }];

export function loadConfig(opts: LoadOptions = {}): Config {
  const env = opts.env ?? process.env;
  const file = opts.file ?? (env.ETAGERE_CONFIG || undefined);
  let raw: Raw = {};
  if (file !== undefined) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new ConfigError(`cannot read config file ${file}: ${(err as Error).message}`);
    }
    let parsed: unknown;
    try {
      parsed = parseYaml(text);
    } catch (err) {
      throw new ConfigError(`config file ${file} is not valid YAML: ${(err as Error).message}`);
    }
    if (parsed === null || parsed === undefined) parsed = {};
    if (typeof parsed !== 'object' || Array.isArray(parsed)) {
      throw new ConfigError(`config file ${file} must contain a YAML mapping at the top level`);
    }
    raw = parsed as Raw;
  }
  if (raw.upstreams === undefined) raw.upstreams = structuredClone(DEFAULT_UPSTREAMS);
  applyEnv(raw, env);
  return parseConfig(raw, file !== undefined ? `config (${file} + environment)` : 'config (environment)');
}
