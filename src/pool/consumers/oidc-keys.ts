/**
 * An OIDC issuer's signing keys (oidc.ts verifies tokens with them): its JWKS from `jwks_url`, else
 * from the `jwks_uri` of its discovery document, each fetched with a timeout, no redirect and a
 * size cap. The keys are kept KEYS_MAX_AGE_MS, and fetched again for a token that names an unknown
 * `kid` (a rotated key) at most once per cooldown. Concurrent needs share one fetch.
 *
 * A failed fetch (an error, a timeout, a status other than 200, a document that is not a key set,
 * discovery's included) is remembered: tokens that would need a fetch are refused from memory for
 * FAILURE_RETRY_MS, doubling up to FAILURE_RETRY_MAX_MS while fetches keep failing. Forged tokens
 * naming the issuer therefore cannot aim one fetch per request at an identity provider that is
 * already struggling; tokens signed by keys already held still verify meanwhile.
 */
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { createLocalJWKSet, errors as jose, type JWTVerifyGetKey } from 'jose';
import { readCapped } from '../../platform/bytes.js';
import { secureOrLoopbackUrl } from '../../platform/host.js';

/** How long fetched keys are used before they are fetched again. */
export const KEYS_MAX_AGE_MS = 10 * 60_000;
/** How long a failed fetch is remembered at first; doubled per failure in a row, up to the max. */
export const FAILURE_RETRY_MS = 30_000;
export const FAILURE_RETRY_MAX_MS = 5 * 60_000;
export const FETCH_TIMEOUT_MS = 5_000;
/** The largest discovery document or key set read. */
const DOCUMENT_MAX_BYTES = 64 * 1024;

/** The issuer's keys could not be fetched (now, or recently: remembered). */
export class KeysUnavailable extends Error {
  constructor() {
    super("the issuer's keys could not be fetched");
  }
}

/** A response body read up to `max` bytes; more is an error. */
async function boundedText(res: Response, max: number): Promise<string> {
  if (res.body === null) return '';
  const body = Readable.fromWeb(res.body as WebReadableStream<Uint8Array>);
  const read = await readCapped(body, max);
  if (read.kind === 'failed') throw read.error;
  if (read.kind === 'over') {
    body.destroy();
    throw new Error('document too large');
  }
  return Buffer.concat(read.chunks, read.size).toString('utf8');
}

/** A JSON document from `url`: 200 only, within `timeoutMs` and the size cap. */
async function fetchJson(url: string | URL, timeoutMs: number): Promise<unknown> {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), redirect: 'error', headers: { accept: 'application/json' } });
  if (res.status !== 200) {
    await res.body?.cancel();
    throw new Error(`answered ${res.status}`);
  }
  return JSON.parse(await boundedText(res, DOCUMENT_MAX_BYTES)) as unknown;
}

/** The issuer's jwks_uri from its discovery document (which must name the same issuer). */
async function discoverJwks(issuer: string, timeoutMs: number): Promise<URL> {
  const address = `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
  const doc = (await fetchJson(address, timeoutMs)) as { issuer?: unknown; jwks_uri?: unknown };
  if (doc.issuer !== issuer) throw new Error('discovery names another issuer');
  if (typeof doc.jwks_uri !== 'string' || !secureOrLoopbackUrl(doc.jwks_uri)) throw new Error('discovery has no usable jwks_uri');
  return new URL(doc.jwks_uri);
}

export interface IssuerKeysOptions {
  /** The issuer's `iss`; its discovery document is read when there is no `jwksUrl`. */
  readonly issuer: string;
  readonly jwksUrl: string | null;
  /** The least time between two fetches for unknown kids (jose's cooldown; tests set 0). */
  readonly cooldownMs: number;
  /** Each fetch's time limit (default FETCH_TIMEOUT_MS). */
  readonly timeoutMs?: number | undefined;
  readonly now: () => number;
}

export class IssuerKeys {
  readonly #options: IssuerKeysOptions;
  /** The key set's address: configured, or found through discovery (then kept). */
  #url: URL | undefined;
  #keys: JWTVerifyGetKey | undefined;
  #fetchedAt = Number.NEGATIVE_INFINITY;
  /** Failed fetches in a row, and the time before which none is tried again. */
  #failures = 0;
  #retryAt = 0;
  #pending: Promise<void> | undefined;

  constructor(options: IssuerKeysOptions) {
    this.#options = options;
    this.#url = options.jwksUrl === null ? undefined : new URL(options.jwksUrl);
  }

  /** The verification key of a token's header (jose's `getKey`): fetches when the keys are missing, old, or lack the kid. */
  readonly getKey: JWTVerifyGetKey = async (header, token) => {
    if (this.#keys === undefined || this.#options.now() - this.#fetchedAt >= KEYS_MAX_AGE_MS) await this.#refresh();
    try {
      return await this.#keys!(header, token);
    } catch (err) {
      // An unknown kid may be a rotated key: fetched again, at most once per cooldown.
      if (!(err instanceof jose.JWKSNoMatchingKey) || this.#options.now() - this.#fetchedAt < this.#options.cooldownMs) throw err;
      await this.#refresh();
      return this.#keys!(header, token);
    }
  };

  /** Fetches the key set, unless a fetch is under way (shared) or failed lately (refused from memory). */
  #refresh(): Promise<void> {
    if (this.#pending !== undefined) return this.#pending;
    if (this.#options.now() < this.#retryAt) return Promise.reject(new KeysUnavailable());
    const pending = this.#fetch().then(
      (keys) => {
        this.#keys = keys;
        this.#fetchedAt = this.#options.now();
        this.#failures = 0;
        this.#retryAt = 0;
      },
      () => {
        this.#failures++;
        const backoff = Math.min(FAILURE_RETRY_MAX_MS, FAILURE_RETRY_MS * 2 ** Math.min(this.#failures - 1, 10));
        this.#retryAt = this.#options.now() + backoff;
        throw new KeysUnavailable();
      },
    );
    this.#pending = pending.finally(() => (this.#pending = undefined));
    return this.#pending;
  }

  async #fetch(): Promise<JWTVerifyGetKey> {
    const timeoutMs = this.#options.timeoutMs ?? FETCH_TIMEOUT_MS;
    this.#url ??= await discoverJwks(this.#options.issuer, timeoutMs);
    // A document that is not a key set throws here (jose's JWKSInvalid): a failed fetch too.
    return createLocalJWKSet((await fetchJson(this.#url, timeoutMs)) as Parameters<typeof createLocalJWKSet>[0]);
  }
}
