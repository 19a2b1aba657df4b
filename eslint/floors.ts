/**
 * The floors of src/ (docs/architecture.md, "Floors"): each imports only the floors below it.
 *
 *   main -> paths -> { cache, pool } -> upstream -> http -> platform
 *
 * Inside a floor: cache/store -> cache/rules; pool's folders -> pool/rules; no path imports
 * another, and the paths' shared modules (src/paths/*.ts) import no path. The fake GitHub
 * (fake-github/) and src/ know nothing of each other, but for the CLI's commands in src/main/.
 */
import { fileURLToPath } from 'node:url';

type Zone = { target: string | string[]; from: string | string[]; message: string };

const FLOORS = ['main', 'paths', 'cache|pool', 'upstream', 'http', 'platform'] as const;
const PATHS = ['rest', 'graphql', 'pass-through', 'webhooks', 'admin'] as const;
const dir = (name: string): string => `./src/${name}`;

function floorZones(): Zone[] {
  const zones: Zone[] = [];
  FLOORS.forEach((floor, index) => {
    const below = FLOORS.slice(index + 1).flatMap((name) => name.split('|'));
    if (below.length === 0) return;
    for (const name of floor.split('|'))
      zones.push({ target: below.map(dir), from: dir(name), message: `a lower floor imports src/${name}/` });
  });
  zones.push({ target: dir('pool'), from: dir('cache'), message: 'the pool never imports the cache: pass it a value' });
  zones.push({ target: dir('cache'), from: dir('pool'), message: 'the cache never imports the pool: pass it a value' });
  return zones;
}

function insideZones(): Zone[] {
  const zones: Zone[] = [
    { target: dir('cache/rules'), from: dir('cache/store'), message: 'cache rules are pure: they import no store' },
    {
      target: dir('pool/rules'),
      from: ['backends', 'members', 'consumers', 'runtime.ts', 'pooled-fetch.ts'].map((name) => dir(`pool/${name}`)),
      message: 'pool rules are pure: they import nothing else of the pool',
    },
    {
      target: ['backends', 'members', 'consumers'].map((name) => dir(`pool/${name}`)),
      from: ['runtime.ts', 'pooled-fetch.ts'].map((name) => dir(`pool/${name}`)),
      message: "the pool's folders import no module of the pool's root",
    },
    {
      target: ['./src/paths/*.ts'],
      from: PATHS.map((name) => dir(`paths/${name}`)),
      message: "the paths' shared modules import no path",
    },
  ];
  for (const name of PATHS)
    zones.push({
      target: dir(`paths/${name}`),
      from: PATHS.filter((other) => other !== name).map((other) => dir(`paths/${other}`)),
      message: 'no path imports another',
    });
  return zones;
}

const fakeZones: Zone[] = [
  { target: './fake-github', from: './src', message: 'the fake GitHub stands alone: it imports nothing of the proxy' },
  {
    target: ['paths', 'cache', 'pool', 'upstream', 'http', 'platform'].map(dir),
    from: './fake-github',
    message: 'only the CLI (src/main/) starts the fake GitHub',
  },
];

/** What ships (src/, fake-github/) never imports what only runs beside it. */
const productZones: Zone[] = [
  {
    target: ['./src', './fake-github'],
    from: ['./test', './bench', './scripts', './eslint'],
    message: 'the product imports no test, bench or script',
  },
];

export const floorRules = {
  'import-x/no-restricted-paths': [
    'error',
    // The zones' paths are the repository's (this folder's parent), wherever lint runs from.
    { basePath: fileURLToPath(new URL('..', import.meta.url)), zones: [...floorZones(), ...insideZones(), ...fakeZones, ...productZones] },
  ],
} as const;

/** Anywhere in the tree. A cycle through type-only imports is not one at run time: the rule skips it. */
export const cycleRules = {
  'import-x/no-cycle': ['error', { ignoreExternal: true }],
} as const;
