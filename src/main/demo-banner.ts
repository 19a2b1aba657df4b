/**
 * What `etagere demo` prints: the banner at start (every URL it serves; the README shows it), then
 * a one-line summary a second: requests, hit ratio, quota saved, and each pool token's remaining quota.
 */
import type { RecentSummary } from '../platform/metrics/request-metrics.js';

/** Every URL the demo serves, then a few requests to try. */
export function demoBanner(app: { readonly url: string; readonly adminUrl: string }, fakeUrl: string): string {
  return `
etagere demo
  proxy          ${app.url}
  status page    ${app.adminUrl}/
  admin          ${app.adminUrl}/metrics  ${app.adminUrl}/healthz  ${app.adminUrl}/readyz  ${app.adminUrl}/admin/tokens  ${app.adminUrl}/admin/status
  fake upstream  ${fakeUrl}  (stats: ${fakeUrl}/__fake/stats)

Try:
  curl -i ${app.url}/repos/octocat/hello-world
  curl -i '${app.url}/orgs/etagere-org/repos?per_page=5'
  curl -i -H 'Authorization: token demo_token_alice_repo' ${app.url}/user
  curl -i ${app.url}/bicyclists/helsinki
  curl -s ${fakeUrl}/__fake/stats

`;
}

export interface TokenLine {
  name: string;
  remaining: number | null;
  limit: number | null;
  state: string;
}

/** One summary line, e.g. `requests 120 | hit ratio 71.7 % | quota saved 86 | alice-public 52/60 ok`. */
export function summaryLine(recent: RecentSummary, tokens: readonly TokenLine[]): string {
  const ratio = recent.hitRatio === null ? '-' : `${(recent.hitRatio * 100).toFixed(1)} %`;
  const parts = [`requests ${recent.requests}`, `hit ratio ${ratio}`, `quota saved ${recent.saved}`];
  for (const token of tokens)
    parts.push(`${token.name} ${token.remaining ?? '?'}/${token.limit ?? '?'}${token.state === 'ok' ? '' : ` ${token.state}`}`);
  return parts.join(' | ');
}
