/**
 * Seed data and the mutable "world" the fake serves: accounts (users and organizations),
 * repositories, cyclist counts and zen sayings. Deterministic: the same options always give
 * the same world. Rendering to JSON lives in render.ts.
 */
import type { FakeToken } from './tokens.js';

export type AccountType = 'User' | 'Organization';

export interface Account {
  login: string;
  id: number;
  type: AccountType;
  name: string;
  company: string | null;
  blog: string;
  location: string | null;
  /** Public e-mail (shown on /users/:login); null when hidden. */
  email: string | null;
  /** E-mail shown on /user to the account itself. */
  privateEmail: string;
  bio: string | null;
  twitter: string | null;
  followers: number;
  following: number;
  publicGists: number;
  privateGists: number;
  /** Epoch ms, whole seconds. */
  createdAt: number;
  updatedAt: number;
  /** Lower-case logins of members (organizations only). */
  members: Set<string>;
  /** Bumped on every mutation; render caches key on it. */
  version: number;
  /** Render cache: cleared when the account changes. */
  cache: Map<string, unknown>;
}

export interface License {
  key: string;
  name: string;
  spdx_id: string;
  node_id: string;
}

export interface Repo {
  id: number;
  name: string;
  owner: Account;
  private: boolean;
  description: string;
  homepage: string;
  language: string;
  topics: string[];
  license: License;
  createdAt: number;
  updatedAt: number;
  pushedAt: number;
  size: number;
  stargazers: number;
  forks: number;
  openIssues: number;
  subscribers: number;
  hasPages: boolean;
  hasWiki: boolean;
  version: number;
  cache: Map<string, unknown>;
}

export interface City {
  name: string;
  count: number;
}

export const CITIES = ['benalmadena', 'cordoba', 'fuengirola', 'helsinki', 'malaga', 'moscow', 'spb'] as const;

export const ZEN = [
  'Responsive is better than fast.',
  "It's not fully shipped until it's fast.",
  'Anything added dilutes everything else.',
  'Practicality beats purity.',
  'Approachable is better than simple.',
  'Mind your words, they are important.',
  'Speak like a human.',
  'Half measures are as bad as nothing at all.',
  'Encourage flow.',
  'Non-blocking is better than blocking.',
  'Favor focus over features.',
  'Design for failure.',
  'Keep it logically awesome.',
] as const;

export const LICENSES: Record<string, License> = {
  mit: { key: 'mit', name: 'MIT License', spdx_id: 'MIT', node_id: 'MDc6TGljZW5zZTEz' },
  'apache-2.0': { key: 'apache-2.0', name: 'Apache License 2.0', spdx_id: 'Apache-2.0', node_id: 'MDc6TGljZW5zZTI=' },
  'bsd-3-clause': {
    key: 'bsd-3-clause',
    name: 'BSD 3-Clause "New" or "Revised" License',
    spdx_id: 'BSD-3-Clause',
    node_id: 'MDc6TGljZW5zZTU=',
  },
  'gpl-3.0': { key: 'gpl-3.0', name: 'GNU General Public License v3.0', spdx_id: 'GPL-3.0', node_id: 'MDc6TGljZW5zZTk=' },
};

/** The organization of the seed data. */
export const SEED_ORG = 'etagere-org';

const parseIso = (iso: string): number => Date.parse(iso);
const DAY = 86_400_000;

interface AccountSeed {
  login: string;
  id: number;
  type: AccountType;
  name: string;
  company?: string;
  blog?: string;
  location?: string;
  publicEmail?: boolean;
  bio?: string;
  twitter?: string;
  followers: number;
  following: number;
  created: string;
  updated: string;
  members?: string[];
}

const ACCOUNTS: AccountSeed[] = [
  {
    login: 'octocat',
    id: 583231,
    type: 'User',
    name: 'The Octocat',
    company: '@github',
    blog: 'https://github.blog',
    location: 'San Francisco',
    followers: 21000,
    following: 9,
    created: '2011-01-25T18:44:36Z',
    updated: '2024-06-22T11:25:02Z',
  },
  {
    login: 'alice',
    id: 100001,
    type: 'User',
    name: 'Alice Liddell',
    company: 'Etagere Org',
    location: 'Helsinki',
    publicEmail: true,
    bio: 'Caches all the things.',
    followers: 42,
    following: 7,
    created: '2015-03-14T09:26:53Z',
    updated: '2024-02-01T08:00:00Z',
  },
  {
    login: 'bob',
    id: 100002,
    type: 'User',
    name: 'Bob Cyclist',
    location: 'Malaga',
    bio: 'Counts bicycles.',
    twitter: 'bob_rides',
    followers: 5,
    following: 12,
    created: '2016-07-01T12:00:00Z',
    updated: '2023-11-11T11:11:11Z',
  },
  {
    login: 'carol',
    id: 100003,
    type: 'User',
    name: 'Carol Outsider',
    location: 'Cordoba',
    followers: 3,
    following: 1,
    created: '2018-05-05T05:05:05Z',
    updated: '2023-05-05T05:05:05Z',
  },
  {
    login: SEED_ORG,
    id: 200001,
    type: 'Organization',
    name: 'Etagere Org',
    blog: 'https://example.org/etagere',
    location: 'Fuengirola',
    bio: 'Home of many small repositories.',
    followers: 120,
    following: 0,
    created: '2019-12-01T00:00:00Z',
    updated: '2024-03-03T03:03:03Z',
    members: ['alice', 'octocat'],
  },
];

interface RepoSeed {
  owner: string;
  name: string;
  id: number;
  private?: boolean;
  description: string;
  language: string;
  license: keyof typeof LICENSES;
  created: string;
  updated: string;
  stars: number;
  forks: number;
  issues: number;
  topics?: string[];
}

const REPOS: RepoSeed[] = [
  {
    owner: 'octocat',
    name: 'hello-world',
    id: 1296269,
    description: 'My first repository on GitHub!',
    language: 'JavaScript',
    license: 'mit',
    created: '2011-01-26T19:01:12Z',
    updated: '2024-06-20T10:00:00Z',
    stars: 2800,
    forks: 2400,
    issues: 1400,
    topics: ['hello', 'example'],
  },
  {
    owner: 'octocat',
    name: 'spoon-knife',
    id: 1300192,
    description: 'This repo is for demonstration purposes only.',
    language: 'HTML',
    license: 'mit',
    created: '2011-01-27T19:30:43Z',
    updated: '2024-05-01T12:00:00Z',
    stars: 12500,
    forks: 140000,
    issues: 9000,
  },
  {
    owner: 'octocat',
    name: 'linguist',
    id: 1725199,
    description: 'Language Savant.',
    language: 'Ruby',
    license: 'mit',
    created: '2011-05-09T22:53:13Z',
    updated: '2024-01-15T16:00:00Z',
    stars: 150,
    forks: 200,
    issues: 3,
  },
  {
    owner: 'octocat',
    name: 'private-notes',
    id: 1725300,
    private: true,
    description: 'Octocat private notes.',
    language: 'Markdown',
    license: 'mit',
    created: '2012-02-02T02:02:02Z',
    updated: '2024-04-04T04:04:04Z',
    stars: 0,
    forks: 0,
    issues: 0,
  },
  {
    owner: 'alice',
    name: 'dotfiles',
    id: 5000001,
    description: 'Alice configuration files.',
    language: 'Shell',
    license: 'mit',
    created: '2015-04-01T10:00:00Z',
    updated: '2023-12-24T18:00:00Z',
    stars: 12,
    forks: 2,
    issues: 0,
  },
  {
    owner: 'alice',
    name: 'website',
    id: 5000002,
    description: 'Source of a small personal website.',
    language: 'TypeScript',
    license: 'apache-2.0',
    created: '2017-09-09T09:09:09Z',
    updated: '2024-02-29T12:00:00Z',
    stars: 4,
    forks: 1,
    issues: 2,
  },
  {
    owner: 'alice',
    name: 'secret-project',
    id: 5000003,
    private: true,
    description: 'Not for everybody.',
    language: 'Go',
    license: 'bsd-3-clause',
    created: '2022-01-01T00:00:00Z',
    updated: '2024-03-01T00:00:00Z',
    stars: 1,
    forks: 0,
    issues: 5,
  },
  {
    owner: 'bob',
    name: 'bikes',
    id: 5000101,
    description: 'Counting bicycles in southern Spain.',
    language: 'Python',
    license: 'gpl-3.0',
    created: '2016-08-01T08:00:00Z',
    updated: '2023-10-10T10:10:10Z',
    stars: 31,
    forks: 3,
    issues: 4,
  },
  {
    owner: 'bob',
    name: 'diary',
    id: 5000102,
    private: true,
    description: 'Dear diary.',
    language: 'Markdown',
    license: 'mit',
    created: '2019-01-01T00:00:00Z',
    updated: '2023-11-01T00:00:00Z',
    stars: 0,
    forks: 0,
    issues: 0,
  },
  {
    owner: 'carol',
    name: 'notes',
    id: 5000201,
    description: 'Public notes.',
    language: 'Rust',
    license: 'apache-2.0',
    created: '2018-06-06T06:06:06Z',
    updated: '2023-06-06T06:06:06Z',
    stars: 2,
    forks: 0,
    issues: 0,
  },
  {
    owner: SEED_ORG,
    name: 'internal-tools',
    id: 7000001,
    private: true,
    description: 'Private tools of the organization.',
    language: 'TypeScript',
    license: 'mit',
    created: '2020-01-02T00:00:00Z',
    updated: '2024-01-02T00:00:00Z',
    stars: 0,
    forks: 0,
    issues: 7,
  },
  {
    owner: SEED_ORG,
    name: 'roadmap',
    id: 7000002,
    private: true,
    description: 'What comes next.',
    language: 'Markdown',
    license: 'mit',
    created: '2020-01-03T00:00:00Z',
    updated: '2024-01-03T00:00:00Z',
    stars: 0,
    forks: 0,
    issues: 12,
  },
];

const LANGS = ['TypeScript', 'Go', 'Rust', 'Python', 'JavaScript', 'C', 'Java', 'Ruby'];
const LICENSE_KEYS = Object.keys(LICENSES);
const CITY_SEED: Record<(typeof CITIES)[number], number> = {
  benalmadena: 1234,
  cordoba: 4321,
  fuengirola: 987,
  helsinki: 31415,
  malaga: 27182,
  moscow: 100500,
  spb: 65536,
};

export interface WorldOptions {
  orgRepoCount: number;
  tokens: FakeToken[];
}

/** Lower-case key for case-insensitive lookups, like GitHub. */
export const lc = (s: string): string => s.toLowerCase();

export class World {
  readonly accounts = new Map<string, Account>();
  readonly repos = new Map<string, Repo>();
  readonly reposByOwner = new Map<string, Repo[]>();
  readonly cities = new Map<string, City>();
  /** Bumped on every mutation of anything; list caches key on it. */
  generation = 0;
  zenIndex = 0;

  constructor(opts: WorldOptions) {
    for (const seed of ACCOUNTS) this.addAccount(seed);
    // Every token's login exists as a user, so /user works for any configured token.
    let extra = 0;
    for (const tok of opts.tokens) {
      if (this.accounts.has(lc(tok.login))) continue;
      extra++;
      this.addAccount({
        login: tok.login,
        id: 300000 + extra,
        type: 'User',
        name: `Fake User ${tok.login}`,
        followers: 0,
        following: 0,
        created: '2020-02-02T02:02:02Z',
        updated: '2020-02-02T02:02:02Z',
      });
    }
    for (const seed of REPOS) this.addRepo(seed);
    const base = parseIso('2020-01-01T00:00:00Z');
    for (let i = 1; i <= opts.orgRepoCount; i++) {
      const created = base + i * DAY + i * 61_000;
      const num = String(i).padStart(3, '0');
      this.addRepoRaw({
        owner: SEED_ORG,
        name: `repo-${num}`,
        id: 8000000 + i,
        private: false,
        description: `Public repository number ${i} of ${SEED_ORG}.`,
        language: LANGS[i % LANGS.length] ?? 'TypeScript',
        license: LICENSE_KEYS[i % LICENSE_KEYS.length] ?? 'mit',
        created,
        // Spread updates over 2023 so that sort=updated differs from sort=created.
        updated: parseIso('2023-01-01T00:00:00Z') + ((i * 7919) % 360) * DAY + i * 1000,
        stars: (i * 37) % 500,
        forks: (i * 13) % 50,
        issues: i % 9,
        topics: [],
      });
    }
    for (const city of CITIES) this.cities.set(city, { name: city, count: CITY_SEED[city] });
  }

  private addAccount(seed: AccountSeed): void {
    this.accounts.set(lc(seed.login), {
      login: seed.login,
      id: seed.id,
      type: seed.type,
      name: seed.name,
      company: seed.company ?? null,
      blog: seed.blog ?? '',
      location: seed.location ?? null,
      email: seed.publicEmail ? `${seed.login}@example.com` : null,
      privateEmail: `${seed.login}@example.com`,
      bio: seed.bio ?? null,
      twitter: seed.twitter ?? null,
      followers: seed.followers,
      following: seed.following,
      publicGists: seed.type === 'User' ? 1 : 0,
      privateGists: 0,
      createdAt: parseIso(seed.created),
      updatedAt: parseIso(seed.updated),
      members: new Set((seed.members ?? []).map(lc)),
      version: 0,
      cache: new Map(),
    });
  }

  private addRepo(seed: RepoSeed): void {
    this.addRepoRaw({
      ...seed,
      private: seed.private ?? false,
      created: parseIso(seed.created),
      updated: parseIso(seed.updated),
      topics: seed.topics ?? [],
    });
  }

  private addRepoRaw(fields: {
    owner: string;
    name: string;
    id: number;
    private: boolean;
    description: string;
    language: string;
    license: string;
    created: number;
    updated: number;
    stars: number;
    forks: number;
    issues: number;
    topics: string[];
  }): Repo {
    const owner = this.accounts.get(lc(fields.owner));
    if (!owner) throw new Error(`seed: unknown owner ${fields.owner}`);
    const repo: Repo = {
      id: fields.id,
      name: fields.name,
      owner,
      private: fields.private,
      description: fields.description,
      homepage: `https://example.org/${owner.login}/${fields.name}`,
      language: fields.language,
      topics: fields.topics,
      license: LICENSES[fields.license] ?? (LICENSES.mit as License),
      createdAt: fields.created,
      updatedAt: fields.updated,
      pushedAt: fields.updated,
      size: 100 + ((fields.id * 31) % 5000),
      stargazers: fields.stars,
      forks: fields.forks,
      openIssues: fields.issues,
      subscribers: Math.max(1, Math.floor(fields.stars / 10)),
      hasPages: fields.name === 'website',
      hasWiki: !fields.private,
      version: 0,
      cache: new Map(),
    };
    this.repos.set(lc(`${owner.login}/${fields.name}`), repo);
    const list = this.reposByOwner.get(lc(owner.login)) ?? [];
    list.push(repo);
    this.reposByOwner.set(lc(owner.login), list);
    return repo;
  }

  /** A new, empty repository of an existing account (POST /__fake/repos), dated now. */
  createRepo(owner: Account, name: string, isPrivate: boolean, nowMs = Date.now()): Repo {
    const created = Math.floor(nowMs / 1000) * 1000;
    const id = 9_000_000 + this.repos.size + 1;
    const fields = { owner: owner.login, name, id, private: isPrivate, description: '', language: 'TypeScript', license: 'mit' };
    const repo = this.addRepoRaw({ ...fields, created, updated: created, stars: 0, forks: 0, issues: 0, topics: [] });
    this.generation++;
    return repo;
  }

  account(login: string): Account | undefined {
    return this.accounts.get(lc(login));
  }

  repo(owner: string, name: string): Repo | undefined {
    return this.repos.get(lc(`${owner}/${name}`));
  }

  ownedRepos(login: string): Repo[] {
    return this.reposByOwner.get(lc(login)) ?? [];
  }

  /** Organizations the login is a member of. */
  orgsOf(login: string): Account[] {
    const key = lc(login);
    const out: Account[] = [];
    for (const account of this.accounts.values()) if (account.type === 'Organization' && account.members.has(key)) out.push(account);
    return out;
  }

  nextZen(): string {
    const saying = ZEN[this.zenIndex % ZEN.length] ?? ZEN[0];
    this.zenIndex++;
    return saying;
  }
}

/** Next modification time: now (whole seconds), but always at least one second after `prev`. */
export function bumpTime(prev: number, now = Date.now()): number {
  return Math.max(Math.floor(now / 1000) * 1000, prev + 1000);
}

export type Change = Record<string, { from: unknown; to: unknown }>;

export function mutateRepo(world: World, repo: Repo): Change {
  const before = { stargazers_count: repo.stargazers, updated_at: iso(repo.updatedAt) };
  repo.stargazers += 1;
  repo.updatedAt = bumpTime(repo.updatedAt);
  repo.version++;
  repo.cache = new Map();
  world.generation++;
  return {
    stargazers_count: { from: before.stargazers_count, to: repo.stargazers },
    watchers_count: { from: before.stargazers_count, to: repo.stargazers },
    updated_at: { from: before.updated_at, to: iso(repo.updatedAt) },
  };
}

export function mutateAccount(world: World, account: Account): Change {
  const before = { followers: account.followers, updated_at: iso(account.updatedAt) };
  account.followers += 1;
  account.updatedAt = bumpTime(account.updatedAt);
  account.version++;
  account.cache = new Map();
  world.generation++;
  return {
    followers: { from: before.followers, to: account.followers },
    updated_at: { from: before.updated_at, to: iso(account.updatedAt) },
  };
}

export function mutateCity(world: World, city: City): Change {
  const from = city.count;
  city.count += 1 + (from % 7);
  world.generation++;
  return { count: { from, to: city.count } };
}

/** ISO 8601 UTC without milliseconds, as GitHub writes timestamps. */
export function iso(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}
