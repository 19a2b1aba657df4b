/**
 * Pure: how a pool's membership changes when it is given a new list of tokens (a reloaded tokens
 * file; App installation tokens re-minted every hour), and how that list is composed from the
 * tokens and the Apps. A member is known by its name; its value is the credential it currently sends:
 *
 * - kept: the same name with the same value (its learned state stays as it is);
 * - updated: the same name with a new value (its learned state stays: the budget is the name's,
 *   only the credential changed; requests in flight finish with the old value);
 * - added: a name the pool did not have;
 * - removed: a name the new list does not have (no new requests; those in flight finish).
 *
 * Everything here names members by name; no value leaves this module.
 */
import type { MembershipChange, PoolToken } from './types.js';

/** The change from `current` to `next` (both lists of unique names). */
export function diffMembers(current: readonly PoolToken[], next: readonly PoolToken[]): MembershipChange {
  const before = new Map(current.map((token) => [token.name, token.value]));
  const after = new Set(next.map((token) => token.name));
  const added: string[] = [];
  const updated: string[] = [];
  const kept: string[] = [];
  for (const token of next) {
    const value = before.get(token.name);
    if (value === undefined) added.push(token.name);
    else if (value === token.value) kept.push(token.name);
    else updated.push(token.name);
  }
  const removed = current.filter((token) => !after.has(token.name)).map((token) => token.name);
  return { added, removed, updated, kept };
}

/** Whether the change changes anything (members joined, left, or sent a new value). */
export function changesAnything(change: MembershipChange): boolean {
  return change.added.length + change.removed.length + change.updated.length > 0;
}

/** A candidate member with where it came from, for error messages ("tokens file line 3"). */
export interface SourcedToken extends PoolToken {
  readonly where: string;
}

/**
 * Why a list cannot be the pool's membership, or undefined: the same name twice, or the same
 * value twice (one credential counted as two budgets). Names the positions, never a value.
 */
export function membersProblem(tokens: readonly SourcedToken[]): string | undefined {
  const byName = new Map<string, string>();
  const byValue = new Map<string, string>();
  for (const token of tokens) {
    const sameValue = byValue.get(token.value);
    if (sameValue !== undefined) return `${token.where}: the same token as ${sameValue} (value not shown)`;
    const sameName = byName.get(token.name);
    if (sameName !== undefined) return `${token.where}: duplicate token name "${token.name}" (also ${sameName})`;
    byValue.set(token.value, token.where);
    byName.set(token.name, token.where);
  }
  return undefined;
}

/** The pool's members by where they come from (member-sources.ts keeps them). */
export interface MemberGroups {
  /** ETAGERE_TOKENS, pool.tokens and pool.tokens_file's lines, already checked (membersProblem). */
  readonly tokens: readonly PoolToken[];
  /** Each GitHub App's installation tokens (`<app>-<installation id>`), by App name, in config order. */
  readonly apps: ReadonlyArray<readonly [app: string, members: readonly PoolToken[]]>;
}

/** An App member left out of the pool: its name or its value is already another member's. */
export interface SkippedMember {
  readonly app: string;
  readonly name: string;
  readonly why: 'name' | 'value';
}

/**
 * The pool's membership: the tokens, then every App's members in config order. An App member
 * whose name or value an earlier member already has is left out (and reported, by name), so a
 * clash never refuses the whole list nor counts one credential as two budgets.
 */
export function composeMembers(groups: MemberGroups): { members: PoolToken[]; skipped: SkippedMember[] } {
  const members = [...groups.tokens];
  const names = new Set(members.map((token) => token.name));
  const values = new Set(members.map((token) => token.value));
  const skipped: SkippedMember[] = [];
  for (const [app, list] of groups.apps) {
    for (const member of list) {
      const why = names.has(member.name) ? 'name' : values.has(member.value) ? 'value' : undefined;
      if (why !== undefined) {
        skipped.push({ app, name: member.name, why });
        continue;
      }
      names.add(member.name);
      values.add(member.value);
      members.push({ name: member.name, value: member.value });
    }
  }
  return { members, skipped };
}
