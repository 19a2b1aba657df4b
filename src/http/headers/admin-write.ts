/**
 * Pure: whether a state-changing request to the admin port (any method but GET, HEAD and OPTIONS)
 * is the operator's own, not a web page's in the operator's browser (cross-site request forgery).
 *
 * - Content-Type must be `application/json`: a page can send `text/plain`, a form or no type at all
 *   without a CORS preflight (`mode: 'no-cors'`), never JSON, and this port answers no preflight.
 * - `Origin`, when present, must be this admin address itself: `http://` and the request's Host,
 *   which the Host check (host.ts) has already limited to loopback names, `admin.allowed_hosts` and
 *   the connection's own address. A rebinding page that sends its own name fails that check; a page
 *   elsewhere (another port of localhost too) sends its own origin; `Origin: null` is refused.
 * - `Sec-Fetch-Site`, when present, must be `same-origin` or `none` (typed by the user). `same-site`
 *   is refused too: any other port of localhost is the same site.
 * The CLI and curl send no Origin and no Sec-Fetch-Site, so only the Content-Type applies to them.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { hostOf } from '../../platform/host.js';

export interface AdminWriteRefusal {
  readonly status: 403 | 415;
  readonly message: string;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
const ALLOWED_FETCH_SITES = new Set(['same-origin', 'none']);

/** Whether a method changes state on the admin port (and so takes the checks below). */
export function isAdminWrite(method: string | undefined): boolean {
  return !SAFE_METHODS.has(method ?? 'GET');
}

/** The serialised origin of the admin address a Host header names (`http://name[:port]`, port 80 left out); undefined when malformed. */
export function adminOriginOf(host: string | undefined): string | undefined {
  if (host === undefined || hostOf(host) === undefined) return undefined;
  const value = host.trim().toLowerCase();
  return `http://${value.endsWith(':80') ? value.slice(0, -3) : value}`;
}

/** Why a state-changing admin request is refused, or undefined when it may proceed. */
export function adminWriteRefusal(headers: IncomingHttpHeaders): AdminWriteRefusal | undefined {
  const ownOrigin = adminOriginOf(headers.host);
  const origin = headers.origin;
  if (origin !== undefined && origin.trim().toLowerCase() !== ownOrigin)
    return { status: 403, message: `Origin is not this admin address (${ownOrigin ?? 'no Host'}): writes from other origins are refused` };
  const site = headers['sec-fetch-site'];
  if (site !== undefined && !ALLOWED_FETCH_SITES.has(site.trim().toLowerCase()))
    return { status: 403, message: 'Sec-Fetch-Site is not same-origin: the admin port takes writes from its own pages only' };
  const type = headers['content-type'];
  if (type === undefined || type.split(';', 1)[0]!.trim().toLowerCase() !== 'application/json')
    return { status: 415, message: 'Content-Type must be application/json' };
  return undefined;
}
