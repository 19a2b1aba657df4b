/**
 * Reloading pool.tokens_file while the proxy serves (SIGHUP, or the file changed: watch-file.ts).
 * The tokens given besides the file (ETAGERE_TOKENS, pool.tokens) stay; the file's lines become
 * the rest of the tokens through `apply` (member-sources.ts: the GitHub Apps' members stay too;
 * membership.ts says what changed):
 * added and updated members are probed first (GET /rate_limit, as at start-up) and join with
 * their numbers known; removed ones take no new request and finish those in flight; kept ones
 * keep their learned state.
 *
 * A bad file (unreadable, a malformed line, a duplicate, or empty when it had tokens: taken for a
 * write in progress) changes nothing: the current pool stays and the log says why, naming the
 * line, never its text. Reloads run one at a time. Logs and the etagere_token_reloads_total
 * metric name tokens by name only.
 */
import { ConfigError, parseTokensFile, type TokensFileEntry } from '../../platform/config/load.js';
import type { Logger } from '../../platform/log/logger.js';
import type { Metrics } from '../../platform/metrics/registry.js';
import { changesAnything, diffMembers, membersProblem, type SourcedToken } from '../rules/membership.js';
import { tokenName } from '../../platform/config/token-name.js';
import type { RateLimitAnswer } from './probe.js';
import type { MembershipChange, PoolToken } from '../rules/types.js';
import { createReread, type ReloadTrigger } from './reread.js';

export type { ReloadTrigger } from './reread.js';

export type ReloadOutcome =
  /** The file was read and the pool is its membership now (`change` may change nothing). */
  | { result: 'ok'; change: MembershipChange }
  /** A file event, but the file's bytes are those of the last reload: nothing to do (not counted). */
  | { result: 'unchanged' }
  /** Nothing to reload: no pool.tokens_file (not counted). */
  | { result: 'skipped'; why: string }
  /** The current pool stays; `why` names the problem, never a value. */
  | { result: 'failed'; why: string };

export interface ReloaderDeps {
  /** pool.tokens_file. */
  readonly file: string;
  /** The tokens given besides the file, which every reload keeps. */
  readonly beside: ReadonlyArray<{ name?: string | undefined; value: string }>;
  /** The tokens at start-up (the config's, file included). */
  readonly initial: readonly PoolToken[];
  /** Makes these the pool's tokens (MemberSources.setTokens); what changed, by name. */
  apply(tokens: readonly PoolToken[]): MembershipChange;
  /** GET /rate_limit with a credential; undefined when pool.probe_at_start is off (members then join unseen). */
  readonly ask: ((authorization: string) => Promise<RateLimitAnswer>) | undefined;
  /** Tells the pool what a probe said (probe.ts `learnAnswer`). */
  learn(name: string, answer: RateLimitAnswer): void;
  /** A member's credential changed or it left: what was learnt of the old one goes. */
  forget(name: string): void;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly readFile?: (path: string) => string;
}

export interface TokenReloader {
  reload(trigger: ReloadTrigger): Promise<ReloadOutcome>;
}

/** The pool's next members from the file's text, or why the text cannot be (names the line, never a value). */
function nextMembers(text: string, beside: ReloaderDeps['beside'], hadFromFile: number): SourcedToken[] | string {
  let entries: TokensFileEntry[];
  try {
    entries = parseTokensFile(text);
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
  if (entries.length === 0 && hadFromFile > 0)
    return `the file has no tokens (it had ${hadFromFile}): taken for a write in progress; an emptied pool needs a restart`;
  const members: SourcedToken[] = [
    ...beside.map((token, index) => ({
      name: tokenName(token.value, token.name),
      value: token.value,
      where: `pool.tokens[${index}] (ETAGERE_TOKENS or the config)`,
    })),
    ...entries.map((entry) => ({ name: tokenName(entry.value, entry.name), value: entry.value, where: `tokens file line ${entry.line}` })),
  ];
  return membersProblem(members) ?? members;
}

/** Probes the members that join or change credential, in parallel; their answers by name. */
async function probeJoining(
  deps: ReloaderDeps,
  next: readonly PoolToken[],
  names: readonly string[],
): Promise<Map<string, RateLimitAnswer>> {
  const answers = new Map<string, RateLimitAnswer>();
  const ask = deps.ask;
  if (ask === undefined) return answers;
  const byName = new Map(next.map((token) => [token.name, token]));
  await Promise.all(
    names.map(async (name) => {
      const token = byName.get(name);
      if (token !== undefined) answers.set(name, await ask(`token ${token.value}`));
    }),
  );
  return answers;
}

export function createTokenReloader(deps: ReloaderDeps): TokenReloader {
  const reread = createReread(deps.file, deps.readFile);
  const log = deps.log;
  let current: readonly PoolToken[] = deps.initial;
  let fromFile = Math.max(0, deps.initial.length - deps.beside.length);
  let queue: Promise<unknown> = Promise.resolve();

  const failed = (trigger: ReloadTrigger, why: string): ReloadOutcome => {
    deps.metrics.tokenReloads.inc({ result: 'failed' });
    log.error({ trigger, file: deps.file, why }, 'token pool reload failed: keeping the current tokens');
    return { result: 'failed', why };
  };

  const run = async (trigger: ReloadTrigger): Promise<ReloadOutcome> => {
    const read = reread(trigger);
    if ('why' in read) return failed(trigger, read.why);
    if ('unchanged' in read) return { result: 'unchanged' };
    const next = nextMembers(read.text, deps.beside, fromFile);
    if (typeof next === 'string') return failed(trigger, next);
    const members = next.map(({ name, value }) => ({ name, value }));
    const preview = diffMembers(current, members);
    const answers = await probeJoining(deps, members, [...preview.added, ...preview.updated]);
    // The change as far as the tokens go (the Apps' members are kept as they are: member-sources.ts).
    const tokenNames = new Set([...current, ...members].map((token) => token.name));
    const whole = deps.apply(members);
    const change: MembershipChange = {
      added: whole.added.filter((name) => tokenNames.has(name)),
      removed: whole.removed.filter((name) => tokenNames.has(name)),
      updated: whole.updated.filter((name) => tokenNames.has(name)),
      kept: whole.kept.filter((name) => tokenNames.has(name)),
    };
    for (const [name, answer] of answers) deps.learn(name, answer);
    for (const name of [...change.updated, ...change.removed]) deps.forget(name);
    current = members;
    fromFile = next.length - deps.beside.length;
    deps.metrics.tokenReloads.inc({ result: 'ok' });
    const { added, removed, updated, kept } = change;
    log.info(
      { trigger, file: deps.file, added, removed, updated, kept },
      changesAnything(change) ? 'token pool reloaded' : 'token pool reloaded: no change',
    );
    return { result: 'ok', change };
  };

  return {
    reload(trigger) {
      // Never rejects (a signal handler calls it): an unexpected error is a failed reload, named by its kind only.
      const outcome = queue.then(() => run(trigger)).catch((err: unknown) => failed(trigger, `unexpected ${(err as Error).name}`));
      queue = outcome;
      return outcome;
    },
  };
}

/** A reload asked of a process without a pool it could change (never throws). */
export function reloadWithoutPool(file: string | null, trigger: ReloadTrigger, log: Logger, metrics: Metrics): ReloadOutcome {
  if (file === null) {
    const why = 'no pool.tokens_file: tokens from ETAGERE_TOKENS or the config change with a restart';
    log.warn({ trigger }, `token pool reload: nothing to reload (${why})`);
    return { result: 'skipped', why };
  }
  const why = 'the proxy started without pool tokens, so it has no pool to add them to: restart it';
  metrics.tokenReloads.inc({ result: 'failed' });
  log.error({ trigger, file, why }, 'token pool reload failed: keeping the current tokens');
  return { result: 'failed', why };
}
