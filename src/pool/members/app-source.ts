/**
 * The installation tokens of one GitHub App, kept current: the pool's members for that App.
 *
 * - start() lists the installations (with `installations: all`) or takes the configured ids, and
 *   mints a token for each.
 * - Each token is refreshed before it expires: when less than `refreshBeforeMs` (5 minutes) is
 *   left, or half its lifetime for short-lived ones. The old token stays a member until the new
 *   one is there, so a request in flight never finds the pool without a token for the
 *   installation; a token that could not be refreshed leaves at its expiry, never later.
 * - Every `relistIntervalMs` (5 minutes) the installations are listed again (`all`: new ones are
 *   minted for, uninstalled and suspended ones dropped) or the missing configured ones retried.
 * - remint(name) answers a 401 on a member: one new token, at most once per token value.
 * - A revoked installation (uninstalled: 404; suspended: 403) is dropped while the others carry
 *   on; a refused App (wrong key or app_id: 401, unknown App: 404 Integration not found) keeps its
 *   tokens until they expire and is retried. Each is one log line naming the App and installation.
 *
 * Every change of the set is handed to `onChange` as the whole list, named `<app name>-<installation id>`
 * (src/pool/members/app-members.ts makes them pool members). Each listing and each mint is told to
 * `events` (the etagere_app_* metrics). Logs and errors carry names, ids and expiry times: never
 * the key, a JWT or a token. Timers are unref'd: the source never keeps a process alive.
 */
import type { KeyObject } from 'node:crypto';
import type { Logger } from '../../platform/log/logger.js';
import { appJwt } from '../../platform/config/app-jwt.js';
import type { AppFailureKind } from '../rules/app-answers.js';
import { AppRequestError, listInstallations, mintInstallationToken, type AppUpstream, type MintedToken } from './installations.js';

export interface AppMember {
  /** `<app name>-<installation id>` */
  name: string;
  value: string;
  /** epoch ms */
  expiresAt: number;
}

export interface AppDefinition {
  /** The App's label in logs, metrics and member names. */
  name: string;
  appId: number;
  privateKey: KeyObject;
  installations: 'all' | readonly number[];
}

/** How a listing of the installations ended: ok, refused (the App: wrong key or app_id, unknown App), or an error that may pass. */
export type ListResult = 'ok' | 'refused' | 'error';
/** How a mint ended: ok, refused (the App), revoked (the installation: uninstalled or suspended), or an error that may pass. */
export type MintResult = 'ok' | 'refused' | 'revoked' | 'error';

export interface AppSourceEvents {
  listed?(result: ListResult): void;
  minted?(installation: number, result: MintResult): void;
}

/** What a failure's kind counts as. */
export function mintResultOf(kind: AppFailureKind): Exclude<MintResult, 'ok'> {
  return kind === 'app' ? 'refused' : kind === 'installation' ? 'revoked' : 'error';
}

export interface AppSourceOptions {
  app: AppDefinition;
  upstream: AppUpstream;
  onChange: (members: AppMember[]) => void;
  events?: AppSourceEvents;
  logger: Pick<Logger, 'info' | 'warn' | 'error'>;
  /** Refresh a token when less than this is left (at most half its lifetime). Default 5 minutes. */
  refreshBeforeMs?: number;
  /** List again (`all`) or retry missing installations this often. Default 5 minutes. */
  relistIntervalMs?: number;
  /** Try again this long after a failure that may pass (network, 5xx, rate limit, refused App). Default 30 s. */
  retryMs?: number;
  now?: () => number;
}

interface Held {
  token: MintedToken;
  mintedAt: number;
  refresh?: NodeJS.Timeout;
  expiry?: NodeJS.Timeout;
}

/** A JWT is made again after this long (it is good for nine minutes). */
const JWT_REUSE_MS = 4 * 60_000;

export class AppTokenSource {
  private readonly held = new Map<number, Held>();
  /** Installations without a token that are retried on a timer (after a passing failure). */
  private readonly retries = new Map<number, NodeJS.Timeout>();
  private readonly minting = new Map<number, Promise<void>>();
  /** Token values a 401 has already re-minted once. */
  private readonly reminted = new Set<string>();
  private readonly label: string;
  private readonly now: () => number;
  private jwtCache: { jwt: string; madeAt: number } | undefined;
  private syncing: Promise<void> | undefined;
  /** While a sync mints, changes are gathered into one onChange call. */
  private batching = false;
  private dirty = false;
  private relistTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly opts: AppSourceOptions) {
    this.label = `App ${opts.app.name} (id ${opts.app.appId})`;
    this.now = opts.now ?? Date.now;
  }

  /** Lists (or takes) the installations and mints their tokens; resolves with the first members, failures logged. */
  async start(): Promise<AppMember[]> {
    await this.sync();
    if (!this.closed) {
      this.relistTimer = setInterval(() => void this.sync(), this.opts.relistIntervalMs ?? 300_000);
      this.relistTimer.unref();
    }
    return this.members();
  }

  /** The current members, by installation id. */
  members(): AppMember[] {
    return [...this.held.entries()]
      .sort(([left], [right]) => left - right)
      .map(([id, held]) => ({ name: this.memberName(id), value: held.token.value, expiresAt: held.token.expiresAt }));
  }

  /**
   * A 401 on member `name`: mints it a new token, once per token value. With `failedValue` (the
   * value that got the 401), a token already replaced counts as done. Resolves true when a newer
   * token is in place.
   */
  async remint(name: string, failedValue?: string): Promise<boolean> {
    const id = this.idOf(name);
    if (id === undefined || this.closed) return false;
    const pending = this.minting.get(id);
    const current = this.held.get(id)?.token.value;
    if (pending !== undefined) {
      await pending;
      return this.replaced(id, failedValue ?? current);
    }
    if (current === undefined) return false;
    if (failedValue !== undefined && failedValue !== current) return true;
    if (this.reminted.has(current)) return false;
    this.reminted.add(current);
    this.opts.logger.warn({ app: this.opts.app.name, installation: id }, 'installation token answered 401: minting a new one');
    await this.mint(id);
    return this.replaced(id, current);
  }

  /** Whether the installation holds a token other than `value`. */
  private replaced(id: number, value: string | undefined): boolean {
    const now = this.held.get(id)?.token.value;
    return now !== undefined && now !== value;
  }

  /** Lists again now (or retries the configured ids). Runs once at a time. */
  sync(): Promise<void> {
    this.syncing ??= this.syncOnce().finally(() => {
      this.syncing = undefined;
      this.batching = false;
      if (this.dirty) this.emit();
    });
    return this.syncing;
  }

  close(): void {
    this.closed = true;
    if (this.relistTimer !== undefined) clearInterval(this.relistTimer);
    for (const held of this.held.values()) this.clearTimers(held);
    for (const timer of this.retries.values()) clearTimeout(timer);
    this.retries.clear();
  }

  private async syncOnce(): Promise<void> {
    const desired = await this.desiredIds();
    if (desired === undefined || this.closed) return;
    this.batching = true;
    let dropped = false;
    for (const id of [...this.held.keys()]) {
      if (desired.has(id)) continue;
      this.opts.logger.warn(
        { app: this.opts.app.name, installation: id },
        'installation no longer listed (uninstalled or suspended): dropped',
      );
      dropped = this.drop(id) || dropped;
    }
    if (dropped) this.emit();
    for (const [id, timer] of this.retries) {
      if (desired.has(id)) continue;
      clearTimeout(timer);
      this.retries.delete(id);
    }
    await Promise.all([...desired].filter((id) => !this.held.has(id) && !this.retries.has(id)).map((id) => this.mint(id)));
  }

  /** The installations that should have a token: listed and not suspended (`all`), or the configured ids. */
  private async desiredIds(): Promise<Set<number> | undefined> {
    const configured = this.opts.app.installations;
    if (configured !== 'all') return new Set(configured);
    try {
      const listed = await listInstallations(this.opts.upstream, this.jwt(), this.label);
      this.opts.events?.listed?.('ok');
      return new Set(listed.filter((installation) => !installation.suspended).map((installation) => installation.id));
    } catch (err) {
      this.failed(undefined, err);
      return undefined;
    }
  }

  /** Mints a token for one installation (one mint at a time per installation). */
  private mint(id: number): Promise<void> {
    const pending = this.minting.get(id);
    if (pending !== undefined) return pending;
    const run = this.mintOnce(id).finally(() => this.minting.delete(id));
    this.minting.set(id, run);
    return run;
  }

  private async mintOnce(id: number): Promise<void> {
    const retry = this.retries.get(id);
    if (retry !== undefined) clearTimeout(retry);
    this.retries.delete(id);
    try {
      const token = await mintInstallationToken(this.opts.upstream, this.jwt(), id, this.label);
      if (this.closed) return;
      const old = this.held.get(id);
      if (old !== undefined) {
        this.clearTimers(old);
        this.reminted.delete(old.token.value);
      }
      const held: Held = { token, mintedAt: this.now() };
      this.held.set(id, held);
      this.opts.events?.minted?.(id, 'ok');
      this.schedule(id, held);
      this.opts.logger.info(
        { app: this.opts.app.name, installation: id, expiresAt: new Date(token.expiresAt).toISOString() },
        old === undefined ? 'installation token minted' : 'installation token refreshed',
      );
      this.emit();
    } catch (err) {
      if (!this.closed) this.failed(id, err);
    }
  }

  /** A failure: a revoked installation is dropped; anything that may pass is retried (the App's tokens kept until they expire). */
  private failed(id: number | undefined, err: unknown): void {
    const error =
      err instanceof AppRequestError ? err : new AppRequestError('upstream', `${this.label}: ${(err as Error).name ?? 'error'}`);
    const where = { app: this.opts.app.name, installation: id ?? null, kind: error.kind, status: error.status };
    const result = mintResultOf(error.kind);
    if (id === undefined) this.opts.events?.listed?.(result === 'refused' ? 'refused' : 'error');
    else this.opts.events?.minted?.(id, result);
    if (error.kind === 'installation' && id !== undefined) {
      this.opts.logger.warn(where, `${error.message}: dropped`);
      if (this.drop(id)) this.emit();
      return;
    }
    // A refused App is an operator's error; the rest (network, 5xx, rate limit) may pass.
    if (error.kind === 'app') this.opts.logger.error(where, error.message);
    else this.opts.logger.warn(where, error.message);
    if (id === undefined) return; // a listing: the next one comes at the relist interval
    const held = this.held.get(id);
    const left = held === undefined ? Infinity : held.token.expiresAt - this.now();
    const delay = Math.max(50, Math.min(this.opts.retryMs ?? 30_000, left / 2));
    const timer = setTimeout(() => {
      this.retries.delete(id);
      void this.mint(id);
    }, delay);
    timer.unref();
    this.retries.set(id, timer);
  }

  /** Refresh before expiry; leave at expiry if no refresh came. */
  private schedule(id: number, held: Held): void {
    const lifetime = held.token.expiresAt - held.mintedAt;
    const lead = Math.min(this.opts.refreshBeforeMs ?? 300_000, lifetime / 2);
    held.refresh = setTimeout(() => void this.mint(id), Math.max(0, held.token.expiresAt - lead - this.now()));
    held.refresh.unref();
    held.expiry = setTimeout(
      () => {
        if (this.held.get(id) !== held) return;
        this.opts.logger.warn(
          { app: this.opts.app.name, installation: id },
          'installation token expired before a new one could be minted: dropped',
        );
        this.drop(id);
        this.emit(true);
      },
      Math.max(0, held.token.expiresAt - this.now()),
    );
    held.expiry.unref();
  }

  /** Forgets an installation's token; whether there was one. */
  private drop(id: number): boolean {
    const held = this.held.get(id);
    if (held === undefined) return false;
    this.clearTimers(held);
    this.reminted.delete(held.token.value);
    this.held.delete(id);
    return true;
  }

  private clearTimers(held: Held): void {
    if (held.refresh !== undefined) clearTimeout(held.refresh);
    if (held.expiry !== undefined) clearTimeout(held.expiry);
  }

  /** Hands the members to onChange; during a sync the changes are gathered, unless `now` (an expired token leaves at once). */
  private emit(now = false): void {
    if (this.closed) return;
    if (this.batching && !now) {
      this.dirty = true;
      return;
    }
    this.dirty = false;
    try {
      this.opts.onChange(this.members());
    } catch (err) {
      this.opts.logger.error({ app: this.opts.app.name, err: (err as Error).name }, 'the App source listener threw');
    }
  }

  private jwt(): string {
    const now = this.now();
    if (this.jwtCache === undefined || now - this.jwtCache.madeAt >= JWT_REUSE_MS) {
      this.jwtCache = { jwt: appJwt(this.opts.app.appId, this.opts.app.privateKey, now), madeAt: now };
    }
    return this.jwtCache.jwt;
  }

  private memberName(id: number): string {
    return `${this.opts.app.name}-${id}`;
  }

  private idOf(name: string): number | undefined {
    const prefix = `${this.opts.app.name}-`;
    if (!name.startsWith(prefix)) return undefined;
    const id = Number(name.slice(prefix.length));
    return Number.isSafeInteger(id) && id > 0 && this.held.has(id) ? id : undefined;
  }
}
