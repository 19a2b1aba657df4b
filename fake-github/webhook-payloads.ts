/**
 * The payloads of the webhooks the fake sends (webhooks.ts), in the shapes of GitHub's webhook
 * documentation: `repository` (the repository as the REST API renders it, without `permissions`),
 * `organization` (when an organization owns it), `sender` (a simple user), and each event's own
 * fields. Addresses are on the fake's API base. `announce` sends them for one change.
 *
 *   star (created, starred_at) and watch (started)       POST /__fake/mutate on a repository, GraphQL addStar
 *   repository (renamed, changes.repository.name.from)  POST /__fake/rename
 *   installation (created, deleted, suspend, unsuspend)  POST|DELETE /__fake/installations
 *   ping                                                 POST /__fake/webhooks (a webhook configured)
 */
import type { FakeInstallation } from './app-records.js';
import { iso, SEED_ORG, ZEN, type Repo, type World } from './data.js';
import { accountSummary, DEFAULT_API_VERSION, repoRecord } from './render.js';
import type { WebhookSender } from './webhooks.js';
import { orgSimple } from './orgs.js';

type Payload = Record<string, unknown>;

/** The fake's changes have no actor of their own: deliveries name this account as the sender. */
export const FAKE_SENDER = 'octocat';

function senderOf(world: World, login: string | undefined, base: string): Payload | undefined {
  const account = world.account(login ?? FAKE_SENDER) ?? world.account(FAKE_SENDER);
  return account === undefined ? undefined : { ...accountSummary(account, base), user_view_type: 'public' };
}

/** The fields every repository event carries. */
function aboutRepo(world: World, repo: Repo, base: string, sender: string | undefined): Payload {
  const repository = repoRecord(repo, 'none', base, DEFAULT_API_VERSION);
  const out: Payload = { repository };
  if (repo.owner.type === 'Organization') out.organization = orgSimple(repo.owner, base);
  const who = senderOf(world, sender, base);
  if (who !== undefined) out.sender = who;
  return out;
}

export type Announcement = { event: string; payload: Payload; target: { id: number; type: 'organization' | 'repository' | 'integration' } };

/** An organization's hook hears its repositories; a user's repository has a repository hook. */
const targetOf = (repo: Repo): Announcement['target'] =>
  repo.owner.type === 'Organization' ? { id: repo.owner.id, type: 'organization' } : { id: repo.id, type: 'repository' };

/** A star: GitHub sends `star` (created) and `watch` (started). */
export function starred(world: World, repo: Repo, base: string, sender?: string, nowMs = Date.now()): Announcement[] {
  const target = targetOf(repo);
  return [
    { event: 'star', payload: { action: 'created', starred_at: iso(nowMs), ...aboutRepo(world, repo, base, sender) }, target },
    { event: 'watch', payload: { action: 'started', ...aboutRepo(world, repo, base, sender) }, target },
  ];
}

export function renamed(world: World, repo: Repo, from: string, base: string): Announcement[] {
  return [
    {
      event: 'repository',
      payload: { action: 'renamed', changes: { repository: { name: { from } } }, ...aboutRepo(world, repo, base, undefined) },
      target: targetOf(repo),
    },
  ];
}

/** `action`: created, deleted, suspend, unsuspend. */
export function installationChanged(
  world: World,
  installation: FakeInstallation,
  action: string,
  base: string,
  appSlug: string,
): Announcement[] {
  const account = world.account(installation.account);
  const repositories = [...world.repos.values()]
    .filter((repo) => installation.covers(repo))
    .map((repo) => ({
      id: repo.id,
      node_id: repoRecord(repo, 'none', base, DEFAULT_API_VERSION).node_id,
      name: repo.name,
      full_name: `${repo.owner.login}/${repo.name}`,
      private: repo.private,
    }));
  const payload: Payload = {
    action,
    installation: {
      id: installation.id,
      account: account === undefined ? null : accountSummary(account, base),
      repository_selection: installation.selection,
      access_tokens_url: `${base}/app/installations/${installation.id}/access_tokens`,
      repositories_url: `${base}/installation/repositories`,
      app_id: installation.appId,
      app_slug: appSlug,
      target_id: account?.id ?? 0,
      target_type: account?.type ?? 'User',
      created_at: iso(installation.createdAt),
      suspended_at: installation.suspendedAt === null ? null : iso(installation.suspendedAt),
    },
    repositories,
  };
  const who = senderOf(world, undefined, base);
  if (who !== undefined) payload.sender = who;
  return [{ event: 'installation', payload, target: { id: installation.appId, type: 'integration' } }];
}

/** The `ping` GitHub sends to a webhook just created (an organization hook on the seed organization). */
export function ping(world: World, url: string, hookId: number, base: string, nowMs = Date.now()): Announcement[] {
  const org = world.account(SEED_ORG);
  const payload: Payload = {
    zen: ZEN[Math.floor(nowMs / 1000) % ZEN.length],
    hook_id: hookId,
    hook: {
      type: 'Organization',
      id: hookId,
      name: 'web',
      active: true,
      events: ['*'],
      config: { content_type: 'json', insecure_ssl: '0', url },
      updated_at: iso(nowMs),
      created_at: iso(nowMs),
      url: `${base}/orgs/${SEED_ORG}/hooks/${hookId}`,
      ping_url: `${base}/orgs/${SEED_ORG}/hooks/${hookId}/pings`,
      deliveries_url: `${base}/orgs/${SEED_ORG}/hooks/${hookId}/deliveries`,
    },
  };
  if (org !== undefined) payload.organization = orgSimple(org, base);
  const who = senderOf(world, undefined, base);
  if (who !== undefined) payload.sender = who;
  return [{ event: 'ping', payload, target: { id: org?.id ?? 0, type: 'organization' } }];
}

/** Sends each announcement; returns the delivery GUIDs (none when no webhook is configured). */
export function announce(sender: WebhookSender, announcements: readonly Announcement[]): string[] {
  const ids: string[] = [];
  for (const { event, payload, target } of announcements) {
    const id = sender.send(event, payload, target.id, target.type);
    if (id !== undefined) ids.push(id);
  }
  return ids;
}
