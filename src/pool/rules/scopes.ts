/**
 * Pool tokens' OAuth scopes, as the upstream reports them (`X-OAuth-Scopes`, on every answer to a
 * classic token), and whether they agree. Pure.
 *
 * Only classic tokens' scope sets are compared: a fine-grained personal access token and an App
 * installation token send no `X-OAuth-Scopes` (they have permissions, which the upstream does not
 * tell), and a member not heard from yet is unknown. Such members never make the pool differ; two
 * classic tokens with different sets do. `pool.equivalent: true` then stops holding: the pool is
 * served as non-equivalent (a cache partition per token) until the sets agree again.
 */
/** Where a member's scopes come from: its answers' header, answers without it, or nothing yet. */
export type ScopesFrom = 'x-oauth-scopes' | 'not-sent' | 'unseen';

/** A member's scopes as the pool keeps them: the header's text as received, and the set it names. */
export interface MemberScopes {
  readonly from: ScopesFrom;
  /** The header's value as received (compared first: the same text needs no parsing). */
  readonly raw: string | undefined;
  /** Sorted, without duplicates; empty unless `from` is `x-oauth-scopes`. */
  readonly scopes: readonly string[];
}

export const UNSEEN_SCOPES: MemberScopes = { from: 'unseen', raw: undefined, scopes: [] };
const NOT_SENT: MemberScopes = { from: 'not-sent', raw: undefined, scopes: [] };

/** `X-OAuth-Scopes` as a sorted set: comma separated, spaces around each ignored. */
export function parseScopes(header: string): readonly string[] {
  const set = new Set<string>();
  for (const part of header.split(',')) {
    const scope = part.trim();
    if (scope !== '') set.add(scope);
  }
  return [...set].sort();
}

/**
 * What an answer teaches of a member's scopes, or undefined when nothing changes. A header sets
 * them; its absence counts only on a successful answer of a member whose scopes are not known (an
 * answer of another upstream, or an error page, never erases a classic token's set).
 */
export function learnScopes(current: MemberScopes, header: string | undefined, status: number): MemberScopes | undefined {
  if (header !== undefined) {
    if (current.from === 'x-oauth-scopes' && current.raw === header) return undefined;
    return { from: 'x-oauth-scopes', raw: header, scopes: parseScopes(header) };
  }
  if (current.from !== 'unseen' || status < 200 || status >= 400) return undefined;
  return NOT_SENT;
}

/** A member's scopes as /admin/tokens shows them. */
export interface ScopesRow {
  readonly name: string;
  /** The scopes reported (sorted); null when the member sends none or is not heard from yet (`scopes_from`). */
  readonly scopes: readonly string[] | null;
  readonly scopes_from: ScopesFrom;
}

export function scopesRow(name: string, member: MemberScopes): ScopesRow {
  return { name, scopes: member.from === 'x-oauth-scopes' ? member.scopes : null, scopes_from: member.from };
}

/** The classic members grouped by scope set; the members whose scopes cannot be compared. */
export interface ScopeAgreement {
  /** Two classic members or more report different scope sets. */
  readonly differ: boolean;
  /** One group per scope set, in the members' order: the names of the members that report it. */
  readonly groups: ReadonlyArray<{ scopes: readonly string[]; tokens: readonly string[] }>;
  /** Members not compared: they send no X-OAuth-Scopes, or were not heard from yet. */
  readonly unchecked: readonly string[];
}

/** Whether the members' reported scopes agree (see the top of this file). */
export function scopeAgreement(rows: readonly ScopesRow[]): ScopeAgreement {
  const groups = new Map<string, { scopes: readonly string[]; tokens: string[] }>();
  const unchecked: string[] = [];
  for (const row of rows) {
    if (row.scopes === null) {
      unchecked.push(row.name);
      continue;
    }
    const id = row.scopes.join(',');
    const group = groups.get(id);
    if (group === undefined) groups.set(id, { scopes: row.scopes, tokens: [row.name] });
    else group.tokens.push(row.name);
  }
  const list = [...groups.values()];
  return { differ: list.length > 1, groups: list, unchecked };
}

/** What /admin/tokens and the status page show of the pool's equivalence. */
export interface EquivalenceReport {
  /** `pool.equivalent` as configured. */
  readonly equivalent_configured: boolean;
  /** What the cache does now: one partition for the pool (true), or one per token. */
  readonly equivalent: boolean;
  readonly scopes_differ: boolean;
  readonly scope_groups: ScopeAgreement['groups'];
  readonly scopes_unchecked: readonly string[];
}

export function equivalenceReport(configured: boolean, rows: readonly ScopesRow[]): EquivalenceReport {
  const agreement = scopeAgreement(rows);
  return {
    equivalent_configured: configured,
    equivalent: configured && !agreement.differ,
    scopes_differ: agreement.differ,
    scope_groups: agreement.groups,
    scopes_unchecked: agreement.unchecked,
  };
}

/** A key of the groups, to tell whether an agreement changed (the warning is logged once per change). */
export function agreementKey(agreement: ScopeAgreement): string {
  return agreement.differ ? agreement.groups.map((group) => `${group.scopes.join(',')}=${group.tokens.join(',')}`).join(';') : '';
}

/**
 * Whether a 404 that member `name` met may be its scopes' doing, and another member could see
 * more: the answer's `X-Accepted-OAuth-Scopes` (the scopes the endpoint accepts) names none that
 * `name` reports, and one that a live member not in `exclude` reports. GitHub answers 404, not 403,
 * to a token whose scopes do not reach a private resource.
 */
export function anotherSeesMore(
  rows: ReadonlyArray<ScopesRow & { readonly state?: string }>,
  name: string,
  accepted: string | undefined,
  exclude: ReadonlySet<string>,
): boolean {
  if (accepted === undefined) return false;
  const wanted = parseScopes(accepted);
  if (wanted.length === 0) return false;
  const grants = (row: ScopesRow): boolean => row.scopes !== null && row.scopes.some((scope) => wanted.includes(scope));
  const own = rows.find((row) => row.name === name);
  if (own === undefined || own.scopes === null || grants(own)) return false;
  return rows.some((row) => row.name !== name && !exclude.has(row.name) && row.state !== 'dead' && grants(row));
}
