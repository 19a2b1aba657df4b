/**
 * Pure: the tags (tags.ts) a signed webhook delivery purges, beside the paths it marks stale
 * (webhook-events.ts):
 *
 *   repo:<repository.full_name>   every delivery about a repository; with a rename its former name
 *                                 (changes.repository.name.from), with a transfer its former owner's
 *                                 (changes.owner.from.user|organization.login); each repository a
 *                                 list names (an installation's `repositories`, `repositories_added`)
 *   owner:<login>                 on an event that changes an account's repositories or members
 *                                 (ORG_WIDE): the repository's owner (and former owner), the
 *                                 organization, the installation's account
 *   node:<node_id>                each object the delivery is about: every top-level object (and
 *                                 list of objects) of the payload with a node_id, but the
 *                                 sender, the installation, the enterprise and, on other than
 *                                 ORG_WIDE events, the organization (they are who and where, not what changed)
 *
 * A stored 404 is filed under its repository and owner (classify.ts): a delivery that could
 * create its path (a repository created, transferred, renamed or publicized, a member added, an
 * organization member added) purges it with the rest.
 */
import { fullNameTag, nodeTag, ownerTag, repoTag } from './tags.js';

/** Events that change what an account holds (its repositories, its members, its teams). */
export const ORG_WIDE = new Set([
  'repository',
  'public',
  'organization',
  'membership',
  'team',
  'team_add',
  'installation',
  'installation_repositories',
]);

/** Payload fields that are not what the delivery is about. */
const CONTEXT = new Set(['sender', 'installation', 'enterprise', 'organization', 'changes']);

const field = (value: unknown, key: string): unknown =>
  value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>)[key] : undefined;
const dig = (value: unknown, ...path: string[]): unknown => path.reduce(field, value);

/** At most this many tags per delivery (a payload lists at most a few hundred objects). */
const MAX_DELIVERY_TAGS = 1_000;

export function deliveryTags(event: string, payload: Record<string, unknown>): string[] {
  const tags = new Set<string>();
  const add = (tag: string | undefined): void => {
    if (tag !== undefined && tags.size < MAX_DELIVERY_TAGS) tags.add(tag);
  };
  const repository = payload.repository;
  const owner = dig(repository, 'owner', 'login');
  add(fullNameTag(field(repository, 'full_name')) ?? repoTag(owner, field(repository, 'name')));
  add(repoTag(owner, dig(payload, 'changes', 'repository', 'name', 'from')));
  const formerOwner =
    dig(payload, 'changes', 'owner', 'from', 'user', 'login') ?? dig(payload, 'changes', 'owner', 'from', 'organization', 'login');
  add(repoTag(formerOwner, field(repository, 'name')));
  const wide = ORG_WIDE.has(event);
  if (wide) {
    add(ownerTag(owner));
    add(ownerTag(formerOwner));
    add(ownerTag(dig(payload, 'organization', 'login')));
    add(ownerTag(dig(payload, 'installation', 'account', 'login')));
  }
  for (const [name, value] of Object.entries(payload)) {
    if (CONTEXT.has(name) && !(wide && name === 'organization')) continue;
    if (!Array.isArray(value)) add(nodeTag(field(value, 'node_id')));
    else
      for (const item of value) {
        add(nodeTag(field(item, 'node_id')));
        add(fullNameTag(field(item, 'full_name'))); // an installation's repositories
      }
  }
  return [...tags];
}
