/** Types of scripts/build-if-stale.mjs (plain node, so that `npm run prepare` needs no TypeScript loader). */
export declare const SOURCES: readonly string[];
export declare const STAMP: string;
export declare const BUILD_ARGS: readonly string[];
export declare function staleness(root: string): { stale: boolean; reason: string };
export declare function stamp(root: string, startedMs: number): void;
