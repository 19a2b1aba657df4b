/**
 * The secret values (tokens, consumer keys) the suite uses, by NAME, for the secrets scan that
 * runs after the whole suite (test/helpers/secrets-scan.ts, wired as vitest's globalSetup).
 * The scan looks for every one of them in every captured log line, metric scrape, admin answer
 * and error body; a hit fails `npm test`, naming the file and the secret's name, never its value.
 *
 * The scan gets its values from three sources:
 *   1. KNOWN_SECRETS below: the fake upstream's demo tokens and the token literals of the test
 *      files. New tests should take their tokens from `testSecret(name, value)`.
 *   2. Values recorded while the tests run (`recordSecret`): the pool tokens and consumer keys of
 *      every proxy started by startTestProxy, the secrets in the environment and arguments of
 *      spawned CLI processes (test/helpers/cli.ts), and every credential a test sends through
 *      undici or fetch (test/helpers/capture-setup.ts watches undici's diagnostics channel).
 *   3. A pattern scan for GitHub-shaped tokens (SECRET_PATTERNS).
 *
 * Values shorter than MIN_SECRET_LENGTH are not scanned for (a four-letter test token would
 * match ordinary text); the scan reports how many it skipped.
 */
import { DEMO_TOKENS } from '../../fake-github/tokens.js';

export interface NamedSecret {
  name: string;
  value: string;
}

export const MIN_SECRET_LENGTH = 8;

/**
 * GitHub token formats (classic PAT, OAuth, user-to-server, server-to-server such as App
 * installation tokens, refresh, fine-grained PAT), and the secrets of GitHub Apps: a signed JWT and
 * a private key in PEM form (test/helpers/apps.ts also records each test key's lines by value).
 */
export const SECRET_PATTERNS: ReadonlyArray<{ name: string; re: RegExp }> = [
  { name: 'a GitHub-shaped token (ghp_/gho_/ghu_/ghs_/ghr_)', re: /(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{20,}/ },
  { name: 'a fine-grained GitHub token (github_pat_)', re: /(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{20,}/ },
  { name: 'a signed JWT (a GitHub App JWT?)', re: /eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{20,}/ },
  { name: 'a private key (PEM)', re: /-----BEGIN (?:RSA |EC |ENCRYPTED )?PRIVATE KEY-----/ },
];

const literal = (file: string, values: readonly string[]): NamedSecret[] =>
  values.map((value, i) => ({ name: `${file} literal #${i + 1}`, value }));

/** Every token the fake knows by default, and the token literals of the existing test files. */
export const KNOWN_SECRETS: readonly NamedSecret[] = [
  ...DEMO_TOKENS.map((t) => ({ name: `fake DEMO_TOKENS ${t.login} (${t.scopes.join('+')})`, value: t.token })),
  ...literal('e2e/octokit', ['demo_token_nobody']),
  ...literal('e2e/octokit-pool', ['octokit_consumer_key_77']),
  ...literal('fake-upstream/control', ['custom_tok', 'wrong_token']),
  ...literal('fake-upstream/limits', ['no_such_token']),
  ...literal('fake-upstream/units', ['secret_value_123']),
  ...literal('integration/observability', ['obs_pool_token_one1', 'obs_pool_token_two2']),
  ...literal('integration/pass-through', ['ghp_supersecretvalue000000000000000001']),
  ...literal('integration/redis-l2', ['cluster_pool_token_1', 'cluster_pool_token_2']),
  ...literal('integration/replicas', ['rep_pool_token_a1', 'rep_pool_token_b2', 'rep_pool_token_c3']),
  ...literal('integration/status-page', ['status_page_token_aa1', 'status_page_token_bb2']),
  ...literal('integration/token-pool', [
    'pool_secret_token_aaaa1111',
    'pool_secret_token_bbbb2222',
    'pool_secret_token_cccc3333',
    'pool_secret_token_revoked9999',
    'consumer_key_web_5f2a9c',
  ]),
  ...literal('integration/workers', ['workers_tok_a1', 'workers_tok_b2']),
  ...literal('unit/access-log', ['ghp_secretsecretsecret']),
  ...literal('unit/cache-key', ['ghp_0123456789abcdefghijklmnopqrstuvwxyz']),
];

/** Values recorded in this process since the last `takeRecordedSecrets()`, by value. */
const recorded = new Map<string, string>();
const known = new Map<string, string>(KNOWN_SECRETS.map((s) => [s.value, s.name]));

/**
 * Records a secret seen at run time (its name is what the scan reports). A value already known
 * keeps its first name. Values with spaces or empty ones are ignored.
 */
export function recordSecret(name: string, value: string | undefined): void {
  if (value === undefined) return;
  const trimmed = value.trim();
  if (trimmed.length === 0 || known.has(trimmed) || recorded.has(trimmed)) return;
  recorded.set(trimmed, name);
}

/** A token for a test, registered under `name`: `const TOKEN = testSecret('my-test alice', 'tok_...')`. */
export function testSecret(name: string, value: string): string {
  recordSecret(name, value);
  return value;
}

/** The secrets recorded so far in this process (and forgets them: the caller persists them). */
export function takeRecordedSecrets(): NamedSecret[] {
  const out = [...recorded].map(([value, name]) => ({ name, value }));
  for (const secret of out) known.set(secret.value, secret.name);
  recorded.clear();
  return out;
}

/** The credential in an Authorization value: the token of `token`/`Bearer`, user and password of `Basic`. */
export function credentialsIn(authorization: string): string[] {
  const value = authorization.trim();
  const sp = value.indexOf(' ');
  if (sp <= 0) return [value];
  const scheme = value.slice(0, sp).toLowerCase();
  const rest = value.slice(sp + 1).trim();
  if (scheme !== 'basic') return [rest];
  const decoded = Buffer.from(rest, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? [decoded] : [decoded.slice(0, colon), decoded.slice(colon + 1)];
}
