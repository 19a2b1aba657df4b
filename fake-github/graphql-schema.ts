/**
 * The fake's GraphQL schema: a small, faithful subset of GitHub's (names, types and nullability as
 * in GitHub's public schema) over the seed world of data.ts, built with the reference `graphql`
 * package. Resolvers are plain objects and functions (graphql's default field resolver calls a
 * source's function fields with the arguments and the context).
 *
 *   Query     viewer, repository(owner, name), organization(login), user(login), rateLimit
 *             (a repository's `issues`: those the fake opened, issues.ts)
 *   Mutation  addStar(input: {starrableId}): a star on a repository (stargazer count + 1)
 *
 * Not-found answers carry GitHub's `type: "NOT_FOUND"` (graphql.ts lifts it out of `extensions`).
 * Connections (`repositories(first, after)`) are paginated with opaque cursors; their cost and
 * their pagination limits are graphql-cost.ts's business, checked before execution.
 */
import { buildSchema, GraphQLError, type GraphQLSchema } from 'graphql';
import { canSee } from './auth.js';
import type { Viewer } from './auth.js';
import { iso, mutateRepo, type Account, type Repo, type World } from './data.js';
import { accountNodeId, repoNodeId, webBaseOf } from './render.js';
import { issueNodeId, repoIssues, type Issue } from './issues.js';
import type { QuotaWindow } from './quota.js';

export const SCHEMA_SDL = /* GraphQL */ `
  "An ISO-8601 encoded UTC date string."
  scalar DateTime
  "An RFC 3986, RFC 3987, and RFC 6570 (level 4) compliant URI string."
  scalar URI

  type Query {
    "The currently authenticated user."
    viewer: User!
    "Lookup a given repository by the owner and repository name."
    repository(owner: String!, name: String!, followRenames: Boolean = true): Repository
    "Lookup a organization by login."
    organization(login: String!): Organization
    "Lookup a user by login."
    user(login: String!): User
    "The client's rate limit information."
    rateLimit(dryRun: Boolean = false): RateLimit
  }

  type Mutation {
    "Adds a star to a Starrable."
    addStar(input: AddStarInput!): AddStarPayload
  }

  input AddStarInput {
    clientMutationId: String
    starrableId: ID!
  }

  type AddStarPayload {
    clientMutationId: String
    starrable: Starrable
  }

  interface Starrable {
    id: ID!
    stargazerCount: Int!
    viewerHasStarred: Boolean!
  }

  interface RepositoryOwner {
    id: ID!
    login: String!
    url: URI!
    avatarUrl(size: Int): URI!
    repositories(first: Int, after: String): RepositoryConnection!
  }

  type User implements RepositoryOwner {
    id: ID!
    databaseId: Int
    login: String!
    name: String
    company: String
    location: String
    url: URI!
    avatarUrl(size: Int): URI!
    createdAt: DateTime!
    updatedAt: DateTime!
    repositories(first: Int, after: String): RepositoryConnection!
  }

  type Organization implements RepositoryOwner {
    id: ID!
    databaseId: Int
    login: String!
    name: String
    description: String
    location: String
    url: URI!
    avatarUrl(size: Int): URI!
    createdAt: DateTime!
    updatedAt: DateTime!
    repositories(first: Int, after: String): RepositoryConnection!
  }

  type Repository implements Starrable {
    id: ID!
    databaseId: Int
    name: String!
    nameWithOwner: String!
    description: String
    homepageUrl: URI
    isPrivate: Boolean!
    isFork: Boolean!
    isArchived: Boolean!
    visibility: RepositoryVisibility!
    stargazerCount: Int!
    forkCount: Int!
    viewerHasStarred: Boolean!
    url: URI!
    createdAt: DateTime!
    updatedAt: DateTime!
    pushedAt: DateTime
    owner: RepositoryOwner!
    "The issues the fake opened on this repository (POST /__fake/issues), oldest first."
    issues(first: Int, after: String, states: [IssueState!]): IssueConnection!
  }

  type Issue {
    id: ID!
    databaseId: Int
    number: Int!
    title: String!
    state: IssueState!
    url: URI!
    createdAt: DateTime!
    repository: Repository!
  }

  enum IssueState {
    OPEN
    CLOSED
  }

  type IssueConnection {
    nodes: [Issue]
    pageInfo: PageInfo!
    totalCount: Int!
  }

  enum RepositoryVisibility {
    INTERNAL
    PRIVATE
    PUBLIC
  }

  type RepositoryConnection {
    edges: [RepositoryEdge]
    nodes: [Repository]
    pageInfo: PageInfo!
    totalCount: Int!
  }

  type RepositoryEdge {
    cursor: String!
    node: Repository
  }

  type PageInfo {
    endCursor: String
    hasNextPage: Boolean!
    hasPreviousPage: Boolean!
    startCursor: String
  }

  type RateLimit {
    cost: Int!
    limit: Int!
    nodeCount: Int!
    remaining: Int!
    resetAt: DateTime!
    used: Int!
  }
`;

/** Built once: the schema does not depend on the instance. */
export const SCHEMA: GraphQLSchema = buildSchema(SCHEMA_SDL);

/** What one execution knows: who asks, the world, the base URL, the call's cost and its quota window. */
export interface GraphqlContext {
  readonly world: World;
  readonly viewer: Viewer;
  readonly base: string;
  readonly cost: number;
  readonly nodeCount: number;
  readonly window: QuotaWindow;
  /** Repositories starred by this viewer in this instance (addStar). */
  readonly stars: Set<string>;
  /** Called after addStar starred a repository (the fake's webhooks). */
  readonly onStar?: (repo: Repo, login: string) => void;
}

type Node = Record<string, unknown>;

/** An error GitHub types (`NOT_FOUND`, ...): graphql.ts moves the type to the error's top level. */
export function typedError(type: string, message: string): GraphQLError {
  return new GraphQLError(message, { extensions: { type } });
}

const cursorOf = (index: number): string => Buffer.from(`cursor:v2:${index}`).toString('base64');

/** The index a cursor points at, or undefined when it is not one of ours. */
function indexOfCursor(cursor: string): number | undefined {
  const text = Buffer.from(cursor, 'base64').toString('utf8');
  const match = /^cursor:v2:(\d{1,9})$/.exec(text);
  return match === null ? undefined : Number(match[1]);
}

/** A connection's `pageInfo`: `size` items from `start` of `total`. */
function pageInfoOf(start: number, size: number, total: number): Node {
  return {
    startCursor: size > 0 ? cursorOf(start) : null,
    endCursor: size > 0 ? cursorOf(start + size - 1) : null,
    hasNextPage: start + size < total,
    hasPreviousPage: start > 0,
  };
}

/** Where a page starts: just past the `after` cursor, or at 0 (GitHub's error for a cursor it never gave). */
function startAfter(after: string | null | undefined): number {
  if (after === undefined || after === null) return 0;
  const at = indexOfCursor(after);
  if (at === undefined) throw typedError('INVALID_CURSOR_ARGUMENTS', `\`${after.slice(0, 100)}\` does not appear to be a valid cursor.`);
  return at + 1;
}

/** A page of a repository list: `first` after `after` (pagination limits were checked before execution). */
function connection(repos: readonly Repo[], args: { first?: number | null; after?: string | null }, ctx: GraphqlContext): Node {
  const start = startAfter(args.after);
  const size = Math.max(0, args.first ?? 0);
  const page = repos.slice(start, start + size);
  // Nodes are built only when selected: a `totalCount` under thousands of parents stays cheap.
  return {
    totalCount: repos.length,
    nodes: () => page.map((repo) => repositoryNode(repo, ctx)),
    edges: () => page.map((repo, offset) => ({ cursor: cursorOf(start + offset), node: repositoryNode(repo, ctx) })),
    pageInfo: pageInfoOf(start, page.length, repos.length),
  };
}

/** An account's repositories as the viewer may see them, oldest first (GitHub's default order). */
function visibleRepos(account: Account, ctx: GraphqlContext): Repo[] {
  return ctx.world
    .ownedRepos(account.login)
    .filter((repo) => canSee(ctx.viewer, repo))
    .sort((left, right) => left.createdAt - right.createdAt || left.id - right.id);
}

function accountNode(account: Account, ctx: GraphqlContext): Node {
  return {
    __typename: account.type,
    id: accountNodeId(account),
    databaseId: account.id,
    login: account.login,
    name: account.name,
    company: account.company,
    description: account.type === 'Organization' ? account.name : null,
    location: account.location,
    url: `${webBaseOf(ctx.base).web}/${account.login}`,
    avatarUrl: `${webBaseOf(ctx.base).avatars}/u/${account.id}?v=4`,
    createdAt: iso(account.createdAt),
    updatedAt: iso(account.updatedAt),
    repositories: (args: { first?: number | null; after?: string | null }) => connection(visibleRepos(account, ctx), args, ctx),
  };
}

function repositoryNode(repo: Repo, ctx: GraphqlContext): Node {
  const id = repoNodeId(repo);
  return {
    __typename: 'Repository',
    id,
    databaseId: repo.id,
    name: repo.name,
    nameWithOwner: `${repo.owner.login}/${repo.name}`,
    description: repo.description,
    homepageUrl: repo.homepage,
    isPrivate: repo.private,
    isFork: false,
    isArchived: false,
    visibility: repo.private ? 'PRIVATE' : 'PUBLIC',
    stargazerCount: repo.stargazers,
    forkCount: repo.forks,
    viewerHasStarred: ctx.stars.has(`${ctx.viewer.login}|${id}`),
    url: `${webBaseOf(ctx.base).web}/${repo.owner.login}/${repo.name}`,
    createdAt: iso(repo.createdAt),
    updatedAt: iso(repo.updatedAt),
    pushedAt: iso(repo.pushedAt),
    owner: () => accountNode(repo.owner, ctx),
    issues: (args: { first?: number | null; after?: string | null; states?: readonly string[] | null }) => issueConnection(repo, args, ctx),
  };
}

function issueNode(issue: Issue, ctx: GraphqlContext): Node {
  const { repo } = issue;
  return {
    __typename: 'Issue',
    id: issueNodeId(issue),
    databaseId: issue.id,
    number: issue.number,
    title: issue.title,
    state: issue.state === 'open' ? 'OPEN' : 'CLOSED',
    url: `${webBaseOf(ctx.base).web}/${repo.owner.login}/${repo.name}/issues/${issue.number}`,
    createdAt: iso(issue.createdAt),
    repository: () => repositoryNode(repo, ctx),
  };
}

/** A page of a repository's issues in the states asked for (all when none). */
function issueConnection(
  repo: Repo,
  args: { first?: number | null; after?: string | null; states?: readonly string[] | null },
  ctx: GraphqlContext,
): Node {
  const states = args.states === undefined || args.states === null || args.states.length === 0 ? undefined : new Set(args.states);
  const issues = repoIssues(ctx.world, repo).filter(
    (issue) => states === undefined || states.has(issue.state === 'open' ? 'OPEN' : 'CLOSED'),
  );
  const start = startAfter(args.after);
  const page = issues.slice(start, start + Math.max(0, args.first ?? 0));
  return {
    totalCount: issues.length,
    nodes: () => page.map((issue) => issueNode(issue, ctx)),
    pageInfo: pageInfoOf(start, page.length, issues.length),
  };
}

/** The repository a node id names, if the viewer may see it. */
function findRepoById(ctx: GraphqlContext, id: string): Repo | undefined {
  for (const repo of ctx.world.repos.values()) if (repoNodeId(repo) === id && canSee(ctx.viewer, repo)) return repo;
  return undefined;
}

/** The root value: Query and Mutation fields. */
export const ROOT = {
  viewer: (_args: unknown, ctx: GraphqlContext): Node => {
    const account = ctx.world.account(ctx.viewer.login);
    if (account === undefined) throw typedError('NOT_FOUND', 'Could not resolve to the viewer.');
    return accountNode(account, ctx);
  },
  repository: (args: { owner: string; name: string }, ctx: GraphqlContext): Node => {
    const repo = ctx.world.repo(args.owner, args.name);
    if (repo === undefined || !canSee(ctx.viewer, repo))
      throw typedError('NOT_FOUND', `Could not resolve to a Repository with the name '${args.owner}/${args.name}'.`);
    return repositoryNode(repo, ctx);
  },
  organization: (args: { login: string }, ctx: GraphqlContext): Node => {
    const account = ctx.world.account(args.login);
    if (account === undefined || account.type !== 'Organization')
      throw typedError('NOT_FOUND', `Could not resolve to an Organization with the login of '${args.login}'.`);
    return accountNode(account, ctx);
  },
  user: (args: { login: string }, ctx: GraphqlContext): Node => {
    const account = ctx.world.account(args.login);
    if (account === undefined || account.type !== 'User')
      throw typedError('NOT_FOUND', `Could not resolve to a User with the login of '${args.login}'.`);
    return accountNode(account, ctx);
  },
  rateLimit: (_args: unknown, ctx: GraphqlContext): Node => ({
    cost: ctx.cost,
    limit: ctx.window.limit,
    nodeCount: ctx.nodeCount,
    remaining: ctx.window.limit - ctx.window.used,
    resetAt: iso(ctx.window.endMs),
    used: ctx.window.used,
  }),
  addStar: (args: { input: { starrableId: string; clientMutationId?: string | null } }, ctx: GraphqlContext): Node => {
    const { starrableId, clientMutationId } = args.input;
    const repo = findRepoById(ctx, starrableId);
    if (repo === undefined)
      throw typedError('NOT_FOUND', `Could not resolve to a node with the global id of '${starrableId.slice(0, 100)}'`);
    const key = `${ctx.viewer.login}|${starrableId}`;
    if (!ctx.stars.has(key)) {
      ctx.stars.add(key);
      mutateRepo(ctx.world, repo);
      ctx.onStar?.(repo, ctx.viewer.login);
    }
    return { clientMutationId: clientMutationId ?? null, starrable: repositoryNode(repo, ctx) };
  },
};
