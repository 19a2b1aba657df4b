/**
 * Pure: the tags entries are filed under and purged by (src/cache/store/tags.ts), one spelling for
 * every source (a query's arguments, an answer, a path, a webhook payload, /admin/purge):
 *
 *   repo:<owner>/<name>   a repository, lower case (GitHub's names are case-insensitive)
 *   owner:<login>         a user or organization, lower case
 *   node:<id>             a global node id (GraphQL `id`, a webhook's `node_id`), as given
 *
 * A value that is not a plausible login, repository name or node id makes no tag: a client or a
 * payload never names a tag of its own making.
 */

const LOGIN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/;
const REPO_NAME = /^[A-Za-z0-9._-]{1,100}$/;
/** GitHub's node ids: base64 of a type and a database id (`MDEwOlJlcG9zaXRvcnkxMjk2MjY5`), or a prefix, `_` and base64url (`R_kgDOABCDEF`). */
const NODE_ID = /^[A-Za-z0-9_=+/-]{4,200}$/;

export function repoTag(owner: unknown, name: unknown): string | undefined {
  if (typeof owner !== 'string' || typeof name !== 'string' || !LOGIN.test(owner) || !REPO_NAME.test(name)) return undefined;
  if (name === '.' || name === '..') return undefined;
  return `repo:${owner.toLowerCase()}/${name.toLowerCase()}`;
}

/** `owner/name` as one string (a `nameWithOwner`, a `full_name`). */
export function fullNameTag(fullName: unknown): string | undefined {
  if (typeof fullName !== 'string') return undefined;
  const slash = fullName.indexOf('/');
  return slash <= 0 ? undefined : repoTag(fullName.slice(0, slash), fullName.slice(slash + 1));
}

export function ownerTag(login: unknown): string | undefined {
  return typeof login === 'string' && LOGIN.test(login) ? `owner:${login.toLowerCase()}` : undefined;
}

export function nodeTag(id: unknown): string | undefined {
  return typeof id === 'string' && NODE_ID.test(id) ? `node:${id}` : undefined;
}

/** Whether a text is a tag of one of the three kinds (what /admin/purge takes). */
export function isTag(text: string): boolean {
  if (text.startsWith('repo:')) return fullNameTag(text.slice(5)) === text.toLowerCase();
  if (text.startsWith('owner:')) return ownerTag(text.slice(6)) === text.toLowerCase();
  return text.startsWith('node:') && nodeTag(text.slice(5)) === text;
}

/** A tag as /admin/purge is given it: repo and owner tags in lower case. */
export function normalTag(text: string): string {
  return text.startsWith('node:') ? text : text.toLowerCase();
}
