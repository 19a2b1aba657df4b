/**
 * A GitHub App's two calls, over undici, against an upstream base URL that may carry a base path
 * (`https://api.github.com`, `https://ghe.example.com/api/v3`):
 *
 *   GET  {base}/app/installations?per_page=100   every page, following rel="next" on the same base only
 *   POST {base}/app/installations/{id}/access_tokens
 *
 * Every failure is an AppRequestError whose `kind` says whose fault it is (src/pool/rules/app-answers.ts) and whose
 * message names the App and the installation, never the key, the JWT or a token.
 */
import { request, type Dispatcher } from 'undici';
import { readCapped } from '../../platform/bytes.js';
import {
  classifyAppAnswer,
  nextPage,
  parseInstallations,
  parseMintedToken,
  safeMessage,
  type AppFailureKind,
  type ListedInstallation,
  type MintedToken,
} from '../rules/app-answers.js';

export type { ListedInstallation, MintedToken };

export interface AppUpstream {
  /** The API's base URL, with its base path when it has one. */
  baseUrl: string;
  /** An undici dispatcher (Pool, Agent); undici's global one when unset. */
  dispatcher?: Dispatcher;
  /** Per request, headers and body together. Default 10 s. */
  timeoutMs?: number;
}

export class AppRequestError extends Error {
  override name = 'AppRequestError';
  constructor(
    readonly kind: AppFailureKind,
    message: string,
    /** The upstream's status, or null when there was no answer. */
    readonly status: number | null = null,
  ) {
    super(message);
  }
}

const MAX_BODY = 4 * 1024 * 1024;
/** 100 pages of 100: ten thousand installations. */
const MAX_PAGES = 100;
const ACCEPT = 'application/vnd.github+json';
const API_VERSION = '2022-11-28';

interface Answer {
  status: number;
  remaining: string | undefined;
  link: string | undefined;
  body: unknown;
}

function header(headers: Dispatcher.ResponseData['headers'], name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

/** One exchange; the body parsed as JSON (undefined when it is not JSON). Network failures become AppRequestError('network'). */
async function exchange(upstream: AppUpstream, url: URL, method: 'GET' | 'POST', jwt: string, what: string): Promise<Answer> {
  const timeoutMs = upstream.timeoutMs ?? 10_000;
  try {
    const res = await request(url, {
      method,
      dispatcher: upstream.dispatcher,
      headers: {
        authorization: `Bearer ${jwt}`,
        accept: ACCEPT,
        'x-github-api-version': API_VERSION,
        'user-agent': 'etagere',
        ...(method === 'POST' ? { 'content-type': 'application/json' } : {}),
      },
      body: method === 'POST' ? '{}' : undefined,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const read = await readCapped(res.body, MAX_BODY);
    if (read.kind === 'failed') throw read.error;
    if (read.kind === 'over') {
      res.body.destroy();
      throw new AppRequestError('upstream', `${what}: the answer is larger than ${MAX_BODY} bytes`, res.statusCode);
    }
    let body: unknown;
    try {
      body = JSON.parse(Buffer.concat(read.chunks, read.size).toString('utf8'));
    } catch {
      body = undefined;
    }
    return { status: res.statusCode, remaining: header(res.headers, 'x-ratelimit-remaining'), link: header(res.headers, 'link'), body };
  } catch (err) {
    if (err instanceof AppRequestError) throw err;
    const code = (err as { code?: unknown; name?: unknown }).code ?? (err as { name?: unknown }).name;
    throw new AppRequestError('network', `${what}: no answer (${typeof code === 'string' ? code : 'error'})`);
  }
}

function refused(operation: 'list' | 'mint', answer: Answer, what: string): AppRequestError {
  const message = safeMessage(answer.body);
  const { kind, reason } = classifyAppAnswer(operation, { status: answer.status, remaining: answer.remaining, message });
  return new AppRequestError(kind, `${what}: ${answer.status} ${message}: ${reason}`, answer.status);
}

/** `${base}/app/...`: the base URL with its path kept (a base path is a prefix, not a directory to resolve against). */
function appUrl(baseUrl: string, path: string): URL {
  const base = new URL(baseUrl);
  base.pathname = `${base.pathname.replace(/\/$/, '')}${path}`;
  return base;
}

/** Every installation of the App (all pages). `label` names the App in errors, e.g. "App ci-app". */
export async function listInstallations(upstream: AppUpstream, jwt: string, label: string): Promise<ListedInstallation[]> {
  const base = new URL(upstream.baseUrl);
  let url = appUrl(upstream.baseUrl, '/app/installations');
  url.search = '?per_page=100';
  const all: ListedInstallation[] = [];
  for (let page = 1; page <= MAX_PAGES; page++) {
    const what = `${label}: listing installations (page ${page})`;
    const answer = await exchange(upstream, url, 'GET', jwt, what);
    if (answer.status !== 200) throw refused('list', answer, what);
    const installations = parseInstallations(answer.body);
    if (installations === null) throw new AppRequestError('upstream', `${what}: the answer is not a list of installations`, 200);
    all.push(...installations);
    const next = nextPage(answer.link, base);
    if (next.kind === 'none') return all;
    if (next.kind === 'foreign')
      throw new AppRequestError('upstream', `${what}: the next page is not on the upstream's base URL; not followed`, 200);
    url = next.url;
  }
  throw new AppRequestError('upstream', `${label}: listing installations: more than ${MAX_PAGES} pages`);
}

/** A new token for one installation. */
export async function mintInstallationToken(
  upstream: AppUpstream,
  jwt: string,
  installationId: number,
  label: string,
): Promise<MintedToken> {
  const what = `${label}, installation ${installationId}: minting a token`;
  const answer = await exchange(
    upstream,
    appUrl(upstream.baseUrl, `/app/installations/${installationId}/access_tokens`),
    'POST',
    jwt,
    what,
  );
  if (answer.status !== 201 && answer.status !== 200) throw refused('mint', answer, what);
  const token = parseMintedToken(answer.body, Date.now());
  if (token === null) throw new AppRequestError('upstream', `${what}: the answer holds no usable token and expiry`, answer.status);
  return token;
}
