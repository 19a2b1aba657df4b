/**
 * Renamed repositories, as GitHub handles them: the old name answers `301 Moved Permanently` with
 * `Location: <api>/repositories/:id` and a JSON body naming that URL, for as long as no repository
 * takes the old name; `GET /repositories/:id` serves the repository under its current name.
 * Recorded exchanges (@octokit/fixtures, scenario `rename-repository`) show this shape.
 *
 * The old names live beside the world (a WeakMap keyed by it), so a reset, which builds a new
 * world, forgets them.
 */
import { bumpTime, lc, type Repo, type World } from './data.js';

/** The documentation URL of GitHub's redirect answers (as recorded). */
export const REDIRECT_DOCS_URL = 'https://docs.github.com/v3/#http-redirects';

/** GitHub's repository names: letters, digits, `.`, `-`, `_`, at most 100, and never `.` or `..`. */
const NAME_RE = /^[A-Za-z0-9._-]{1,100}$/;

const moved = new WeakMap<World, Map<string, Repo>>();

export class RenameError extends Error {
  constructor(
    readonly status: 400 | 404 | 422,
    message: string,
  ) {
    super(message);
  }
}

/** The repository that used to be `owner/name` (undefined when the name was never renamed away). */
export function movedRepo(world: World, owner: string, name: string): Repo | undefined {
  return moved.get(world)?.get(lc(`${owner}/${name}`));
}

/** The repository with this id, under its current name. */
export function repoById(world: World, id: number): Repo | undefined {
  for (const repo of world.repos.values()) if (repo.id === id) return repo;
  return undefined;
}

/** The body of a 301 to `location`, as GitHub writes it. */
export function movedBody(location: string): Buffer {
  return Buffer.from(JSON.stringify({ message: 'Moved Permanently', url: location, documentation_url: REDIRECT_DOCS_URL }));
}

/**
 * Renames `repo` to `newName` (same owner). The old name redirects from then on; a name that
 * another repository holds is refused (422), as on GitHub.
 */
export function renameRepo(world: World, repo: Repo, newName: string): { from: string; to: string } {
  if (!NAME_RE.test(newName) || newName === '.' || newName === '..') {
    throw new RenameError(400, '"name" must be 1 to 100 letters, digits, ".", "-" or "_"');
  }
  const owner = repo.owner.login;
  const from = `/repos/${owner}/${repo.name}`;
  const oldKey = lc(`${owner}/${repo.name}`);
  const newKey = lc(`${owner}/${newName}`);
  const holder = world.repos.get(newKey);
  if (holder !== undefined && holder !== repo) throw new RenameError(422, `name already exists on this account: ${newName}`);
  let redirects = moved.get(world);
  if (redirects === undefined) {
    redirects = new Map();
    moved.set(world, redirects);
  }
  world.repos.delete(oldKey);
  if (newKey !== oldKey) redirects.set(oldKey, repo);
  redirects.delete(newKey); // a live repository always wins over an old name
  repo.name = newName;
  world.repos.set(newKey, repo);
  // A new body, ETag and Last-Modified; list caches follow the generation.
  repo.updatedAt = bumpTime(repo.updatedAt);
  repo.version++;
  repo.cache = new Map();
  world.generation++;
  return { from, to: `/repos/${owner}/${newName}` };
}
