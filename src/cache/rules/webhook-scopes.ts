/**
 * Pure: the API-path scopes one delivery makes stale, from its event name and payload, by the
 * table of webhook-events.ts. Returns undefined for an event the table does not name (unknown: ignored).
 */
import { normalPath } from './stale-marks.js';
import { EVENT_TABLE, parseTemplate, type ScopeTemplate } from './webhook-events.js';

type Vars = Partial<Record<VarName, string>> & { repo?: RepoRef };
type VarName = 'owner' | 'org' | 'number' | 'team' | 'sender' | 'member' | 'installation';

interface RepoRef {
  readonly fullName: string;
  readonly id: string | undefined;
}

const LOGIN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/;
const REPO_NAME = /^[A-Za-z0-9._-]{1,100}$/;
const SLUG = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/;
/** Variables whose absence widens the template to the prefix before them, rather than dropping it. */
const WIDENED = new Set(['number', 'installation']);

const field = (value: unknown, key: string): unknown =>
  value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>)[key] : undefined;
const dig = (value: unknown, ...path: string[]): unknown => path.reduce(field, value);

function login(value: unknown): string | undefined {
  return typeof value === 'string' && LOGIN.test(value) ? value : undefined;
}

function positiveId(value: unknown): string | undefined {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value > 0) return String(value);
  return typeof value === 'string' && /^[1-9][0-9]{0,15}$/.test(value) ? value : undefined;
}

function slug(value: unknown): string | undefined {
  return typeof value === 'string' && SLUG.test(value) ? value : undefined;
}

function repoName(value: unknown): string | undefined {
  return typeof value === 'string' && REPO_NAME.test(value) && value !== '.' && value !== '..' ? value : undefined;
}

/** A repository object of a payload (full_name, or owner.login and name; id). */
function repoOf(value: unknown): RepoRef | undefined {
  const id = positiveId(field(value, 'id'));
  const fullName = field(value, 'full_name');
  if (typeof fullName === 'string') {
    const [owner, name, extra] = fullName.split('/');
    if (extra === undefined && login(owner) !== undefined && repoName(name) !== undefined) return { fullName, id };
  }
  const owner = login(dig(value, 'owner', 'login'));
  const name = repoName(field(value, 'name'));
  return owner !== undefined && name !== undefined ? { fullName: `${owner}/${name}`, id } : undefined;
}

function varsOf(payload: unknown): Vars {
  const repo = repoOf(field(payload, 'repository'));
  const vars: Vars = {
    owner:
      login(dig(payload, 'repository', 'owner', 'login')) ??
      login(dig(payload, 'organization', 'login')) ??
      login(dig(payload, 'installation', 'account', 'login')),
    org: login(dig(payload, 'organization', 'login')),
    number:
      positiveId(dig(payload, 'issue', 'number')) ??
      positiveId(dig(payload, 'pull_request', 'number')) ??
      positiveId(field(payload, 'number')),
    team: slug(dig(payload, 'team', 'slug')),
    sender: login(dig(payload, 'sender', 'login')),
    member: login(dig(payload, 'member', 'login')) ?? login(dig(payload, 'membership', 'user', 'login')),
    installation: positiveId(dig(payload, 'installation', 'id')),
  };
  if (repo !== undefined) vars.repo = repo;
  return vars;
}

/** The other repositories and accounts a payload names (see webhook-events.ts), each as variables of its own. */
function othersOf(payload: unknown, vars: Vars): Vars[] {
  const out: Vars[] = [];
  const withRepo = (repo: RepoRef | undefined): void => {
    if (repo !== undefined) out.push({ repo, owner: repo.fullName.split('/')[0] });
  };
  const name = vars.repo?.fullName.split('/')[1];
  const owner = vars.repo?.fullName.split('/')[0];
  const formerName = repoName(dig(payload, 'changes', 'repository', 'name', 'from'));
  if (formerName !== undefined && owner !== undefined) withRepo({ fullName: `${owner}/${formerName}`, id: undefined });
  const formerOwner =
    login(dig(payload, 'changes', 'owner', 'from', 'user', 'login')) ??
    login(dig(payload, 'changes', 'owner', 'from', 'organization', 'login'));
  if (formerOwner !== undefined && name !== undefined) withRepo({ fullName: `${formerOwner}/${name}`, id: undefined });
  withRepo(repoOf(field(payload, 'forkee')));
  withRepo(repoOf(dig(payload, 'changes', 'new_repository')));
  for (const list of ['repositories', 'repositories_added', 'repositories_removed']) {
    const items = field(payload, list);
    if (Array.isArray(items)) for (const item of items.slice(0, 1000)) withRepo(repoOf(item));
  }
  const formerLogin = login(dig(payload, 'changes', 'login', 'from'));
  if (formerLogin !== undefined) out.push({ owner: formerLogin });
  return out;
}

/** One template filled from `vars`: none, one, or two paths ({repo} by name and by id). */
function expand(template: string, vars: Vars): ScopeTemplate[] {
  const { path, prefix } = parseTemplate(template);
  const bases: string[] = [];
  let rest = path;
  if (path.startsWith('{repo}')) {
    if (vars.repo === undefined) return [];
    rest = path.slice('{repo}'.length);
    bases.push(`/repos/${vars.repo.fullName}`);
    if (vars.repo.id !== undefined) bases.push(`/repositories/${vars.repo.id}`);
  } else {
    bases.push('');
  }
  let widened = false;
  const out: string[] = [];
  for (const part of rest.split('/')) {
    const name = /^\{(\w+)\}$/.exec(part)?.[1];
    if (name === undefined) {
      out.push(part);
      continue;
    }
    const value = vars[name as VarName];
    if (value !== undefined) {
      out.push(value);
      continue;
    }
    if (!WIDENED.has(name)) return [];
    widened = true;
    break;
  }
  const tail = out.join('/');
  return bases.map((base) => ({ path: normalPath(base + tail), prefix: prefix || widened }));
}

/** The scopes (API paths, normal form) of one delivery; undefined for an event the table does not name. */
export function scopesFor(event: string, payload: unknown): ScopeTemplate[] | undefined {
  if (!Object.hasOwn(EVENT_TABLE, event)) return undefined;
  const rule = EVENT_TABLE[event]!;
  const vars = varsOf(payload);
  const found = new Map<string, ScopeTemplate>();
  const add = (scope: ScopeTemplate): void => {
    const id = `${scope.prefix ? 'p' : 'x'}${scope.path}`;
    if (!found.has(id)) found.set(id, scope);
  };
  for (const template of rule.scopes) for (const scope of expand(template, vars)) add(scope);
  if (rule.others !== undefined)
    for (const other of othersOf(payload, vars))
      for (const template of rule.others) for (const scope of expand(template, other)) add(scope);
  return [...found.values()];
}
