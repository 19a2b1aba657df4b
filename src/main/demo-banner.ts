/** The banner `etagere demo` prints at start: every URL it serves (the README shows it). */

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
