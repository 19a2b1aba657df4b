/**
 * Fake personal access tokens: the demo set and the `--tokens` flag syntax.
 *
 *   SPEC   := ENTRY ("," ENTRY)*
 *   ENTRY  := TOKEN ["@" LOGIN] ":" [SCOPE ("+" SCOPE)*]
 *
 * The entry is split on its FIRST colon only, because scopes may contain one (`read:org`).
 * Without `@LOGIN` a login is generated (`fake-user-1`, `fake-user-2`, ... by position).
 */

export interface FakeToken {
  token: string;
  login: string;
  scopes: string[];
}

/** Obviously fake strings; documented in docs/fake-upstream.md. */
export const DEMO_TOKENS: FakeToken[] = [
  { token: 'demo_token_alice_repo', login: 'alice', scopes: ['repo', 'read:org'] },
  { token: 'demo_token_alice_public', login: 'alice', scopes: ['public_repo'] },
  { token: 'demo_token_bob_public', login: 'bob', scopes: ['public_repo'] },
  { token: 'demo_token_carol_repo', login: 'carol', scopes: ['repo'] },
  { token: 'demo_token_octocat_repo', login: 'octocat', scopes: ['repo', 'user'] },
];

const TOKEN_RE = /^[A-Za-z0-9_.\-~]+$/;
const LOGIN_RE = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$/;
const SCOPE_RE = /^[a-z0-9_:-]+$/;

/** Parses the value of `--tokens`; throws an Error naming the bad entry. */
export function parseTokenSpec(spec: string): FakeToken[] {
  const out: FakeToken[] = [];
  const seen = new Set<string>();
  const entries = spec.split(',').map((e) => e.trim());
  if (entries.every((e) => e === '')) throw new Error('no token given');
  entries.forEach((entry, index) => {
    if (entry === '') throw new Error(`empty entry at position ${index + 1}`);
    const colon = entry.indexOf(':');
    if (colon < 0) throw new Error(`"${redact(entry)}" has no ":" (form TOKEN[@login]:scope+scope)`);
    const head = entry.slice(0, colon);
    const scopePart = entry.slice(colon + 1);
    const at = head.indexOf('@');
    const token = at < 0 ? head : head.slice(0, at);
    const login = at < 0 ? `fake-user-${index + 1}` : head.slice(at + 1);
    if (!TOKEN_RE.test(token)) throw new Error(`entry ${index + 1}: token must be non-empty [A-Za-z0-9_.-~]`);
    if (!LOGIN_RE.test(login)) throw new Error(`entry ${index + 1}: invalid login "${login}"`);
    if (seen.has(token)) throw new Error(`entry ${index + 1}: duplicate token`);
    seen.add(token);
    const scopes = scopePart === '' ? [] : scopePart.split('+');
    for (const scope of scopes) {
      if (!SCOPE_RE.test(scope)) throw new Error(`entry ${index + 1}: invalid scope "${scope}"`);
    }
    out.push({ token, login, scopes });
  });
  return out;
}

/** Error messages never echo a whole token. */
function redact(entry: string): string {
  return entry.length <= 6 ? '…' : `${entry.slice(0, 4)}…`;
}
