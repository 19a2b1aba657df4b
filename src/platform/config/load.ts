/**
 * Loads the configuration: a YAML file (optional), then environment overrides, then zod validation.
 * This is the only module that reads process.env. Errors name the offending key.
 */
import { closeSync, fstatSync, openSync, readFileSync, readSync } from 'node:fs';
import { TlsFilesError, readTlsPair, type TlsFiles } from './tls-files.js';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { AppKeyError, appPrivateKey } from './app-jwt.js';
import { configSchema, type Config } from './schema.js';
import { consumerKeysProblem, parseConsumerKeysFile, type ConsumerKeyLine } from './keys-file.js';
import { ConfigError, ENV_VARS } from './env-vars.js';

export { ConfigError, ENV_VARS };

/** A config key path as errors name it: `listen.port`, `pool.apps[0].private_key_file`. */
const KEY_PATH = '[a-z_]+(?:\\[\\d+\\])?(?:\\.[a-z_]+(?:\\[\\d+\\])?)*';

/** The config key an ENV_VARS entry sets: the head of its description (none for ETAGERE_CONFIG). */
export function envKey(name: keyof typeof ENV_VARS): string | undefined {
  return new RegExp(`^(${KEY_PATH})(?=$|: | \\()`).exec(ENV_VARS[name])?.[1];
}

/** Which variable of `env` set which key (key -> variable): errors name the variable, not only the key. */
function envSources(env: Env): Map<string, string> {
  const sources = new Map<string, string>();
  for (const name of Object.keys(ENV_VARS) as Array<keyof typeof ENV_VARS>) {
    const key = envKey(name);
    if (key !== undefined && (env[name] ?? '') !== '') sources.set(key, name);
  }
  return sources;
}

/** The variable that set `key` or the nearest key above it, if one did. */
function variableOf(key: string, sources: ReadonlyMap<string, string>): string | undefined {
  let best: string | undefined;
  for (const set of sources.keys())
    if ((key === set || key.startsWith(`${set}.`) || key.startsWith(`${set}[`)) && (best === undefined || set.length > best.length))
      best = set;
  return best === undefined ? undefined : sources.get(best);
}

/** `key: problem`, or `VARIABLE: problem (key)` when an environment variable gave the key its value. */
function naming(key: string, problem: string, sources: ReadonlyMap<string, string>): string {
  const variable = variableOf(key, sources);
  return variable === undefined ? `${key}: ${problem}` : `${variable}: ${problem} (${key})`;
}

/** A ConfigError that starts with a key an environment variable set, re-worded to name that variable. */
function namingVariable(err: ConfigError, sources: ReadonlyMap<string, string>): ConfigError {
  const match = new RegExp(`^(${KEY_PATH}): (.*)$`, 's').exec(err.message);
  return match === null || variableOf(match[1]!, sources) === undefined ? err : new ConfigError(naming(match[1]!, match[2]!, sources));
}

type Env = Readonly<Record<string, string | undefined>>;
type Raw = Record<string, unknown>;

function obj(parent: Raw, key: string): Raw {
  const existing = parent[key];
  if (existing !== null && typeof existing === 'object' && !Array.isArray(existing)) return existing as Raw;
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
  const set = (value: string | undefined, fn: (value: string) => void): void => {
    if (value !== undefined && value !== '') fn(value);
  };
  set(env.PORT, (v) => (obj(raw, 'listen').port = intFromEnv('PORT', v)));
  set(env.HOST, (v) => (obj(raw, 'listen').host = v));
  set(env.ETAGERE_TLS_CERT_FILE, (v) => (obj(obj(raw, 'listen'), 'tls').cert_file = v));
  set(env.ETAGERE_TLS_KEY_FILE, (v) => (obj(obj(raw, 'listen'), 'tls').key_file = v));
  set(env.ADMIN_PORT, (v) => (obj(raw, 'admin').port = intFromEnv('ADMIN_PORT', v)));
  set(env.ADMIN_HOST, (v) => (obj(raw, 'admin').host = v));
  set(env.ETAGERE_ADMIN_TOKEN, (v) => (obj(raw, 'admin').token = v.trim()));
  set(env.PUBLIC_URL, (v) => (raw.public_url = v));
  set(env.REDIS_URL, (v) => (obj(raw, 'redis').url = v));
  set(
    env.REDIS_CLUSTER_NODES,
    (value) =>
      (obj(raw, 'redis').cluster = value
        .split(',')
        .map((n) => n.trim())
        .filter((n) => n.length > 0)),
  );
  set(env.LOG_LEVEL, (v) => (obj(raw, 'log').level = v));
  set(env.WORKERS, (v) => (raw.workers = v.trim() === 'auto' ? 'auto' : intFromEnv('WORKERS', v)));
  set(env.ETAGERE_PARTITION_SECRET, (v) => (obj(raw, 'cache').partition_secret = v));
  set(env.ETAGERE_TOKENS, (v) => (obj(raw, 'pool').tokens = parseSecretList(v.split(','), (index) => `ETAGERE_TOKENS entry ${index + 1}`)));
  set(env.ETAGERE_TOKENS_FILE, (v) => (obj(raw, 'pool').tokens_file = v));
  set(env.ETAGERE_CONSUMER_KEYS_FILE, (v) => (obj(raw, 'consumers').keys_file = v));
  set(env.ETAGERE_WEBHOOK_SECRET, (v) => (obj(raw, 'webhooks').secret = v.trim()));
  set(env.ETAGERE_WEBHOOK_SECRET_FILE, (v) => (obj(raw, 'webhooks').secret_file = v));
  applyAppEnv(raw, env);
  applyTracingEnv(raw, env);
  set(env.UPSTREAM_URL, (url) => {
    const list = raw.upstreams;
    if (Array.isArray(list) && list.length > 0 && list[0] !== null && typeof list[0] === 'object') {
      (list[0] as Raw).url = url;
    } else {
      raw.upstreams = [{ name: 'github', prefix: '/', url, token_pool: true }];
    }
  });
  return raw;
}

/**
 * OpenTelemetry's own variables over the `tracing` section. Either endpoint variable replaces both
 * endpoint keys (the environment says where spans go); resource attributes merge, the variable's
 * winning key by key.
 */
function applyTracingEnv(raw: Raw, env: Env): void {
  const given = (name: string): string | undefined => {
    const value = env[name]?.trim();
    return value === undefined || value === '' ? undefined : value;
  };
  const endpoint = given('OTEL_EXPORTER_OTLP_ENDPOINT');
  const traces = given('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  if (endpoint !== undefined || traces !== undefined) {
    obj(raw, 'tracing').endpoint = endpoint ?? null;
    obj(raw, 'tracing').traces_endpoint = traces ?? null;
  }
  const service = given('OTEL_SERVICE_NAME');
  if (service !== undefined) obj(raw, 'tracing').service_name = service;
  const sampler = given('OTEL_TRACES_SAMPLER');
  if (sampler !== undefined) obj(raw, 'tracing').sampler = sampler;
  const arg = given('OTEL_TRACES_SAMPLER_ARG');
  // Kept as the raw string when it is not a number, so that zod reports it against the key.
  if (arg !== undefined) obj(raw, 'tracing').sampler_arg = /^(?:\d+(?:\.\d*)?|\.\d+)$/.test(arg) ? Number(arg) : arg;
  const attributes = given('OTEL_RESOURCE_ATTRIBUTES');
  if (attributes !== undefined) {
    const tracing = obj(raw, 'tracing');
    tracing.resource_attributes = { ...obj(tracing, 'resource_attributes'), ...parseResourceAttributes(attributes) };
  }
}

/** `key=value,key2=value2` (values percent-encoded), as OTEL_RESOURCE_ATTRIBUTES holds them. */
export function parseResourceAttributes(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  text.split(',').forEach((item, index) => {
    if (item.trim() === '') return;
    const equals = item.indexOf('=');
    const where = `OTEL_RESOURCE_ATTRIBUTES entry ${index + 1}`;
    if (equals <= 0) throw new ConfigError(`${where}: must be key=value`);
    let value: string;
    try {
      value = decodeURIComponent(item.slice(equals + 1).trim());
    } catch {
      throw new ConfigError(`${where}: the value is not validly percent-encoded`);
    }
    out[item.slice(0, equals).trim()] = value;
  });
  return out;
}

/**
 * The one-App shortcut: ETAGERE_APP_ID (with ETAGERE_APP_PRIVATE_KEY_FILE and, optionally,
 * ETAGERE_APP_INSTALLATIONS) replaces pool.apps with one App named "app".
 */
function applyAppEnv(raw: Raw, env: Env): void {
  const id = env.ETAGERE_APP_ID?.trim() ?? '';
  const keyFile = env.ETAGERE_APP_PRIVATE_KEY_FILE?.trim() ?? '';
  const installations = env.ETAGERE_APP_INSTALLATIONS?.trim() ?? '';
  if (id === '') {
    if (keyFile !== '' || installations !== '') {
      throw new ConfigError('ETAGERE_APP_PRIVATE_KEY_FILE and ETAGERE_APP_INSTALLATIONS need ETAGERE_APP_ID (the App id)');
    }
    return;
  }
  const app: Raw = { name: 'app', app_id: intFromEnv('ETAGERE_APP_ID', id) };
  if (keyFile !== '') app.private_key_file = keyFile;
  if (installations !== '' && installations !== 'all') {
    app.installations = installations
      .split(',')
      .map((item) => item.trim())
      .filter((item) => item !== '')
      .map((item) => intFromEnv('ETAGERE_APP_INSTALLATIONS', item));
  }
  obj(raw, 'pool').apps = [app];
}

const TOKEN_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;

/** Why one "token" or "name=token" item is malformed, or undefined. Never quotes the item. */
function secretItemProblem(item: string): string | undefined {
  const equals = item.indexOf('=');
  if (equals === 0) return 'nothing before "=" (write "name=token", or the token alone)';
  if (equals > 0 && item.slice(equals + 1).trim().length === 0) return 'no token after "="';
  if (equals > 0 && !TOKEN_NAME.test(item.slice(0, equals).trim()))
    return 'the name before "=" must be 1-63 letters, digits, "_", "." or "-", starting with a letter or digit';
  const token = equals > 0 ? item.slice(equals + 1).trim() : item;
  if (token.includes(':'))
    return 'the token contains ":" (the fake upstream\'s "token:scopes" syntax is not the proxy\'s; write "name=token")';
  if (!/^[\x21-\x7e]{1,1024}$/.test(token)) return 'the token must be 1-1024 printable characters without spaces';
  return undefined;
}

/**
 * Parses "token" or "name=token" items (ETAGERE_TOKENS, a tokens file). Blank items and "#"
 * comments are skipped. The token after "name=" may itself contain "=". A malformed item is a
 * ConfigError naming its position through `where(index)` (e.g. "ETAGERE_TOKENS entry 2"), never
 * its text: it may be a secret.
 */
export function parseSecretList(
  items: readonly string[],
  where: (index: number) => string = (index) => `entry ${index + 1}`,
): Array<{ name?: string; value: string }> {
  const out: Array<{ name?: string; value: string }> = [];
  items.forEach((item, index) => {
    const trimmed = item.trim();
    if (trimmed.length === 0 || trimmed.startsWith('#')) return;
    const problem = secretItemProblem(trimmed);
    if (problem !== undefined) throw new ConfigError(`${where(index)}: ${problem} (value not shown)`);
    const equals = trimmed.indexOf('=');
    out.push(equals > 0 ? { name: trimmed.slice(0, equals).trim(), value: trimmed.slice(equals + 1).trim() } : { value: trimmed });
  });
  return out;
}

/** One token of a tokens file, with its line (1-based, counting blank and comment lines). */
export interface TokensFileEntry {
  name?: string;
  value: string;
  line: number;
}

/**
 * A tokens file's tokens: one per line, "token" or "name=token", blank lines and "#" comments
 * skipped. A malformed line is a ConfigError naming its line ("tokens file line 3"), never its text.
 */
export function parseTokensFile(text: string): TokensFileEntry[] {
  return text
    .split(/\r?\n/)
    .flatMap((item, index) =>
      parseSecretList([item], () => `tokens file line ${index + 1}`).map((token) => ({ ...token, line: index + 1 })),
    );
}

/** Reads and parses a tokens file; a ConfigError names the file (never a value) when it cannot. */
export function readTokensFile(path: string, readFile: (path: string) => string = (f) => readFileSync(f, 'utf8')): TokensFileEntry[] {
  let text: string;
  try {
    text = readFile(path);
  } catch (err) {
    throw new ConfigError(`pool.tokens_file: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
  }
  return parseTokensFile(text);
}

/** The values the tokens file gave pool.tokens, kept on the raw config and then on the parsed one (never enumerated). */
const FILE_TOKENS = Symbol('tokens from pool.tokens_file');
type WithFileTokens = { [FILE_TOKENS]?: ReadonlySet<string> };

/**
 * The pool tokens a config gives besides its tokens file (ETAGERE_TOKENS, pool.tokens): the ones a
 * reload of the file keeps as they are. All of them when this config's file was not read by `resolveSecrets`.
 */
export function tokensBesideFile(config: Config): Config['pool']['tokens'] {
  const fromFile = (config as Config & WithFileTokens)[FILE_TOKENS];
  return fromFile === undefined ? config.pool.tokens : config.pool.tokens.filter((token) => !fromFile.has(token.value));
}

/**
 * Turns secret references into values before validation: `{ env: NAME }` items of pool.tokens and
 * consumers.keys read the environment, pool.tokens_file adds its lines to pool.tokens, and
 * consumers.keys_file's lines are kept beside consumers.keys (consumerKeysFromFile).
 * Errors name the key and the variable or file, never a value.
 */
export function resolveSecrets(raw: Raw, env: Env, readFile: (path: string) => string = (f) => readFileSync(f, 'utf8')): Raw {
  // Every variable that is not set, named in one error: not one per run.
  const unset: string[] = [];
  const resolveList = (parent: unknown, key: string, where: string): void => {
    if (parent === null || typeof parent !== 'object') return;
    const list = (parent as Raw)[key];
    if (!Array.isArray(list)) return;
    (parent as Raw)[key] = list.map((item: unknown, index) => {
      if (item === null || typeof item !== 'object' || Array.isArray(item)) return item;
      const { env: name, ...rest } = item as Raw;
      if (name === undefined) return item;
      if (typeof name !== 'string' || name.length === 0) throw new ConfigError(`${where}[${index}].env: must name an environment variable`);
      if ('value' in rest) throw new ConfigError(`${where}[${index}]: give either value or env, not both`);
      const value = env[name];
      if (value === undefined || value.trim() === '') {
        unset.push(`${where}[${index}].env: environment variable ${name} is not set`);
        return item;
      }
      return { ...rest, value: value.trim() };
    });
  };
  resolveList(raw.pool, 'tokens', 'pool.tokens');
  resolveList(raw.consumers, 'keys', 'consumers.keys');
  resolveAppKeys(raw.pool, env, readFile, unset);
  if (unset.length > 0) throw new ConfigError(unset.join('; '));
  resolveConsumerKeysFile(raw, readFile);
  resolveWebhookSecret(raw.webhooks, readFile);
  const pool = raw.pool as Raw | undefined;
  const file = pool?.tokens_file;
  if (pool !== undefined && typeof file === 'string' && file.length > 0) {
    const fromFile = readTokensFile(file, readFile).map(({ line: _line, ...token }) => token);
    (raw as Raw & WithFileTokens)[FILE_TOKENS] = new Set(fromFile.map((token) => token.value));
    const existing = Array.isArray(pool.tokens) ? (pool.tokens as unknown[]) : [];
    pool.tokens = [...existing, ...fromFile];
  }
  return raw;
}

/** The lines of consumers.keys_file, kept on the raw config and then on the parsed one (never enumerated). */
const FILE_KEYS = Symbol('keys from consumers.keys_file');
type WithFileKeys = { [FILE_KEYS]?: readonly ConsumerKeyLine[] };

/** The keys consumers.keys_file gave at load (none without a file). */
export function consumerKeysFromFile(config: Config): readonly ConsumerKeyLine[] {
  return (config as Config & WithFileKeys)[FILE_KEYS] ?? [];
}

/** A consumer keys file's lines, checked against the configured consumers; a ConfigError names the file or the line, never a value. */
export function readConsumerKeysFile(
  path: string,
  configured: ReadonlyArray<{ readonly name: string; readonly value?: string | undefined }>,
  readFile: (path: string) => string = (f) => readFileSync(f, 'utf8'),
): ConsumerKeyLine[] {
  let text: string;
  try {
    text = readFile(path);
  } catch (err) {
    throw new ConfigError(`consumers.keys_file: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
  }
  const lines = parseConsumerKeysFile(text);
  const problem = typeof lines === 'string' ? lines : consumerKeysProblem(lines, configured);
  if (problem !== undefined) throw new ConfigError(`consumers.keys_file: ${problem}`);
  return lines as ConsumerKeyLine[];
}

/** Reads consumers.keys_file, when set, against the raw consumers.keys (their names, and values given there). */
function resolveConsumerKeysFile(raw: Raw, readFile: (path: string) => string): void {
  const consumers = raw.consumers;
  if (consumers === null || typeof consumers !== 'object' || Array.isArray(consumers)) return;
  const file = (consumers as Raw).keys_file;
  if (typeof file !== 'string' || file.length === 0) return;
  const keys = (consumers as Raw).keys;
  const configured = (Array.isArray(keys) ? keys : []).flatMap((key: unknown) => {
    const { name, value } = (key ?? {}) as Raw;
    return typeof name === 'string' ? [{ name, value: typeof value === 'string' ? value : undefined }] : [];
  });
  (raw as Raw & WithFileKeys)[FILE_KEYS] = readConsumerKeysFile(file, configured, readFile);
}

/**
 * Reads each App's private key (pool.apps[].private_key_file or private_key_env) into
 * `private_key`, and checks that it is an RSA private key in PEM form. Errors name the key, the
 * file or the variable, and what is wrong: never the key's content. A variable that is not set
 * goes on `unset`.
 */
function resolveAppKeys(pool: unknown, env: Env, readFile: (path: string) => string, unset: string[]): void {
  if (pool === null || typeof pool !== 'object') return;
  const apps = (pool as Raw).apps;
  if (!Array.isArray(apps)) return;
  apps.forEach((app: unknown, index) => {
    if (app === null || typeof app !== 'object' || Array.isArray(app)) return;
    const item = app as Raw;
    const where = `pool.apps[${index}]`;
    const file = item.private_key_file;
    const variable = item.private_key_env;
    const given = [file, variable, item.private_key].filter((source) => source !== undefined).length;
    if (given > 1) throw new ConfigError(`${where}: give only one of private_key_file, private_key_env and private_key`);
    let pem: string;
    let source: string;
    if (typeof file === 'string' && file.length > 0) {
      source = `${where}.private_key_file`;
      try {
        pem = readFile(file);
      } catch (err) {
        throw new ConfigError(`${source}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
      }
    } else if (typeof variable === 'string' && variable.length > 0) {
      source = `${where}.private_key_env`;
      const value = env[variable];
      if (value === undefined || value.trim() === '') {
        unset.push(`${source}: environment variable ${variable} is not set`);
        return;
      }
      // A PEM squeezed onto one line with literal "\n" (as CI secret stores often hold it) is unfolded.
      pem = value.includes('\n') ? value : value.replace(/\\n/g, '\n');
    } else {
      return; // nothing to read: the schema says what is missing
    }
    try {
      appPrivateKey(pem);
    } catch (err) {
      if (err instanceof AppKeyError) throw new ConfigError(`${source}: not the App's private key: ${err.message} (content not shown)`);
      throw err;
    }
    item.private_key = pem;
  });
}

/**
 * Reads webhooks.secret_file into webhooks.secret. Errors name the key and the file, never the
 * secret; giving the secret both ways is an error (which one would win is not obvious).
 */
function resolveWebhookSecret(webhooks: unknown, readFile: (path: string) => string): void {
  if (webhooks === null || typeof webhooks !== 'object' || Array.isArray(webhooks)) return;
  const section = webhooks as Raw;
  const file = section.secret_file;
  if (typeof file !== 'string' || file.length === 0) return;
  if (section.secret !== undefined && section.secret !== null)
    throw new ConfigError(
      'webhooks: give the secret once: secret (or ETAGERE_WEBHOOK_SECRET), or secret_file (or ETAGERE_WEBHOOK_SECRET_FILE)',
    );
  let text: string;
  try {
    text = readFile(file);
  } catch (err) {
    throw new ConfigError(`webhooks.secret_file: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
  }
  const secret = text.replace(/[\r\n]+$/, '');
  if (secret.length === 0) throw new ConfigError(`webhooks.secret_file: ${file} is empty`);
  section.secret = secret;
}

function describePath(path: ReadonlyArray<PropertyKey>): string {
  if (path.length === 0) return '(root)';
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
}

function isBareUrlIssue(issue: z.core.$ZodIssue): boolean {
  return issue.code === 'invalid_format' && issue.format === 'url';
}

/** What is wrong, in the words an operator acts on (zod's own message otherwise). */
function problemOf(key: string, issue: z.core.$ZodIssue): string {
  const isPort = /(?:^|\.)port$/.test(key);
  if (isPort && (issue.code === 'invalid_type' || issue.code === 'too_big' || issue.code === 'too_small'))
    return 'must be a port number, 0-65535';
  if (issue.code === 'invalid_type' && issue.expected === 'number') return 'must be a number';
  if (isBareUrlIssue(issue)) return 'must be a URL';
  return issue.message;
}

/** Validates with `schema`; a ConfigError lists every bad key on one line, naming the variable that set it. */
function parseWith<T>(schema: z.ZodType<T>, raw: unknown, source: string, sources: ReadonlyMap<string, string>): T {
  const result = schema.safeParse(raw);
  if (result.success) return result.data;
  const issues = result.error.issues;
  const keyOf = (issue: z.core.$ZodIssue): string => describePath(issue.path);
  // zod's bare "Invalid URL" says less than the key's own rule beside it (an http:// URL, say).
  const shown = issues.filter(
    (issue) => !(isBareUrlIssue(issue) && issues.some((other) => other !== issue && keyOf(other) === keyOf(issue))),
  );
  const problems = shown.map((issue) => naming(keyOf(issue), problemOf(keyOf(issue), issue), sources));
  throw new ConfigError(`invalid ${source}: ${problems.join('; ')}`);
}

/** Validates a raw object; throws ConfigError listing every bad key (on one line). */
export function parseConfig(raw: unknown, source = 'config', sources: ReadonlyMap<string, string> = new Map()): Config {
  const config = parseWith(configSchema, raw, source, sources);
  const fromFile = (raw as WithFileTokens | null)?.[FILE_TOKENS];
  if (fromFile !== undefined) Object.defineProperty(config, FILE_TOKENS, { value: fromFile });
  const keysFromFile = (raw as WithFileKeys | null)?.[FILE_KEYS];
  if (keysFromFile !== undefined) Object.defineProperty(config, FILE_KEYS, { value: keysFromFile });
  return config;
}

export interface LoadOptions {
  /** Config file path; falls back to ETAGERE_CONFIG, then to no file (built-in defaults). */
  file?: string | undefined;
  env?: Env;
  /** Command-line flags (`etagere serve --port`): over the environment and the file. */
  flags?: FlagOverrides;
}

/** The addresses `etagere serve` takes as flags. */
export interface FlagOverrides {
  port?: number | undefined;
  host?: string | undefined;
  adminPort?: number | undefined;
}

/** Each flag, as errors name it, and the key it sets. */
const FLAG_KEYS = {
  port: ['--port', ['listen', 'port']],
  host: ['--host', ['listen', 'host']],
  adminPort: ['--admin-port', ['admin', 'port']],
} as const;

/** Sets the given flags' keys on a raw config, in place; records which flag set which key. */
function applyFlags(raw: Raw, flags: FlagOverrides, sources: Map<string, string>): void {
  for (const [name, [flag, [section, key]]] of Object.entries(FLAG_KEYS)) {
    const value = flags[name as keyof FlagOverrides];
    if (value === undefined) continue;
    obj(raw, section)[key] = value;
    sources.set(`${section}.${key}`, flag);
  }
}

/** The admin section alone (loadAdminConfig). */
const adminSchema = z.object({ admin: configSchema.shape.admin });

/** The built-in upstream used when neither file nor env names one: GitHub, LRU only. */
const DEFAULT_UPSTREAMS = [{ name: 'github', prefix: '/', url: 'https://api.github.com', token_pool: true }];

/** A config file larger than this is refused unread (a device, a log file, a mistake). */
const MAX_CONFIG_BYTES = 4 * 1024 * 1024;

/** The file's bytes, at most MAX_CONFIG_BYTES of them, as UTF-8 text; a ConfigError on one line otherwise. */
function readConfigText(file: string, named: string): string {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (err) {
    throw new ConfigError(`cannot read config file ${named}: ${(err as Error).message}`);
  }
  try {
    if (fstatSync(fd).isDirectory()) throw new ConfigError(`config file ${named} is a directory: give the YAML file`);
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const chunk = Buffer.alloc(64 * 1024);
      const read = readSync(fd, chunk, 0, chunk.length, null);
      if (read === 0) break;
      total += read;
      if (total > MAX_CONFIG_BYTES) throw new ConfigError(`config file ${named} is larger than 4 MiB: not a config file`);
      chunks.push(chunk.subarray(0, read));
    }
    const bytes = Buffer.concat(chunks);
    if (bytes.includes(0)) throw new ConfigError(`config file ${named} is not text (it holds NUL bytes)`);
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      throw new ConfigError(`config file ${named} is not UTF-8 text`);
    }
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError(`cannot read config file ${named}: ${(err as Error).message}`);
  } finally {
    closeSync(fd);
  }
}

/** The file's top-level mapping ({} without a file) and how errors name the source. */
function readRaw(opts: LoadOptions, env: Env): { raw: Raw; source: string } {
  const file = opts.file ?? (env.ETAGERE_CONFIG || undefined);
  if (file === undefined) return { raw: {}, source: 'config (environment)' };
  const named = opts.file === undefined ? `${file} (ETAGERE_CONFIG)` : file;
  const text = readConfigText(file, named);
  let parsed: unknown;
  try {
    // maxAliasCount bounds alias expansion ("billion laughs"); only the first line of yaml's message,
    // as its excerpt of the file could quote a secret.
    parsed = parseYaml(text, { maxAliasCount: 100, logLevel: 'error' });
  } catch (err) {
    throw new ConfigError(`config file ${named} is not valid YAML: ${(err as Error).message.split('\n')[0]!.replace(/:$/, '')}`);
  }
  if (parsed === null || parsed === undefined) parsed = {};
  if (typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new ConfigError(`config file ${named} must contain a YAML mapping at the top level`);
  }
  return { raw: parsed as Raw, source: `config (${file} + environment)` };
}

export function loadConfig(opts: LoadOptions = {}): Config {
  const env = opts.env ?? process.env;
  const { raw, source } = readRaw(opts, env);
  const sources = envSources(env);
  if (raw.upstreams === undefined) raw.upstreams = structuredClone(DEFAULT_UPSTREAMS);
  try {
    applyEnv(raw, env);
    applyFlags(raw, opts.flags ?? {}, sources);
    resolveSecrets(raw, env);
  } catch (err) {
    throw err instanceof ConfigError ? namingVariable(err, sources) : err;
  }
  const config = parseConfig(raw, source, sources);
  try {
    if (config.listen.tls !== null) checkTlsFiles(config.listen.tls);
  } catch (err) {
    throw err instanceof ConfigError ? namingVariable(err, sources) : err;
  }
  return config;
}

/** The listener's certificate and key are read once at load, so that a bad pair is a config error, not a failed start. */
function checkTlsFiles(files: TlsFiles): void {
  try {
    readTlsPair(files);
  } catch (err) {
    if (err instanceof TlsFilesError) throw new ConfigError(err.message);
    throw err;
  }
}

/**
 * Only the admin section (admin.host, admin.port, admin.token; ADMIN_HOST, ADMIN_PORT,
 * ETAGERE_ADMIN_TOKEN), for the commands that call a running proxy (etagere purge, cache, quota):
 * no other secret is read and no other key is checked.
 */
export function loadAdminConfig(opts: LoadOptions = {}): Pick<Config, 'admin'> {
  const env = opts.env ?? process.env;
  const { raw, source } = readRaw(opts, env);
  const adminEnv = { ADMIN_HOST: env.ADMIN_HOST, ADMIN_PORT: env.ADMIN_PORT, ETAGERE_ADMIN_TOKEN: env.ETAGERE_ADMIN_TOKEN };
  const admin = { admin: raw.admin };
  applyEnv(admin, adminEnv);
  return parseWith(adminSchema, admin, source, envSources(adminEnv));
}

/**
 * The admin token a command sends when given the admin port's URL itself (--admin): the admin
 * section's (ETAGERE_ADMIN_TOKEN, else the config's admin.token), or null when there is none or
 * the config cannot be read (the admin port then says what it needs).
 */
export function loadAdminToken(opts: LoadOptions = {}): string | null {
  try {
    return loadAdminConfig(opts).admin.token;
  } catch (err) {
    if (err instanceof ConfigError) return null;
    throw err;
  }
}
