// Types for scripts/fuzz-core.mjs (imported by test/fuzz/readers.fuzz.test.ts).
export interface FuzzReader {
  readonly name: string;
  run(bytes: Uint8Array): unknown;
}
export type FuzzKind = 'pickle' | 'trace' | 'timeline' | 'capture';
export type FuzzReaders = Record<FuzzKind, FuzzReader[]>;
export interface FuzzOutcome {
  reader: string;
  outcome: 'result' | 'error' | 'crash';
  code?: string;
  message?: string;
  stack?: string;
  ms: number;
}
export function mulberry32(seed: number): () => number;
export function mutate(src: Uint8Array, rand: () => number, text?: boolean): Uint8Array;
export function cutTrace(text: string, keep?: number): string;
export function timelineSeed(): string;
export function readersFor(api: Record<string, (...args: never[]) => unknown>): FuzzReaders;
export function runReaders(readers: FuzzReaders, kind: FuzzKind, bytes: Uint8Array, isMemscopeError: (e: unknown) => boolean): FuzzOutcome[];
