/**
 * The fake tokens of the pool cases (never real ones). The shared fake upstream is started with
 * `--tokens` naming its five demo tokens plus generated ones, so that a case can use a pool of up
 * to POOL_TOKENS_MAX tokens: the two public demo tokens first (the 2-token `l1-hot-pool` case,
 * as before), then `bench_pool_token_03` ... each with its own login and `public_repo`.
 */
import { DEMO_TOKENS } from '../fake-github/tokens.js';

export const POOL_TOKENS_MAX = 50;

interface BenchToken {
  readonly name: string;
  readonly value: string;
  readonly login: string;
  readonly scopes: readonly string[];
}

function generated(index: number): BenchToken {
  const serial = String(index + 1).padStart(2, '0');
  return { name: `bench-${serial}`, value: `bench_pool_token_${serial}`, login: `bench-user-${serial}`, scopes: ['public_repo'] };
}

function demo(value: string, name: string): BenchToken {
  const token = DEMO_TOKENS.find((candidate) => candidate.token === value);
  if (token === undefined) throw new Error(`the fake has no demo token ${name}`);
  return { name, value, login: token.login, scopes: token.scopes };
}

/** The pool's tokens in order: the two public demo tokens, then generated ones. */
function poolTokens(): BenchToken[] {
  const out = [demo('demo_token_alice_public', 'bench-a'), demo('demo_token_bob_public', 'bench-b')];
  for (let index = out.length; index < POOL_TOKENS_MAX; index++) out.push(generated(index));
  return out;
}

/** The value of the fake's `--tokens` flag: every demo token plus the generated pool tokens. */
export function fakeTokenSpec(): string {
  const demoValues = new Set(DEMO_TOKENS.map((token) => token.token));
  const entries = DEMO_TOKENS.map((token) => `${token.token}@${token.login}:${token.scopes.join('+')}`);
  for (const token of poolTokens()) {
    if (!demoValues.has(token.value)) entries.push(`${token.value}@${token.login}:${token.scopes.join('+')}`);
  }
  return entries.join(',');
}

/** `ETAGERE_TOKENS` for a pool of the first `count` tokens (name=value, comma-separated). */
export function poolTokensEnv(count: number): string {
  if (!Number.isInteger(count) || count < 1 || count > POOL_TOKENS_MAX) {
    throw new RangeError(`a bench pool has 1 to ${POOL_TOKENS_MAX} tokens, not ${count}`);
  }
  return poolTokens()
    .slice(0, count)
    .map((token) => `${token.name}=${token.value}`)
    .join(',');
}
