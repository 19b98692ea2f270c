// The corpus of real PyTorch snapshots (../shared/fixtures/torch-snapshots/corpus) and what
// CPython reads from each (its truth.json), for the corpus tests: reader.test.ts (both reading
// paths, CPython's figures), cli.test.ts (every verb), and replay.test.ts (replay of every traced
// device) beside them; vitest.corpus.config.ts runs every test/corpus/*.test.ts.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sharedFile } from '../support/fixtures.js';

/** CPython's figures for one file (truth.json; see the corpus README). */
export interface CorpusTruth {
  readonly segments: number;
  readonly blocks: number;
  readonly reserved: number;
  readonly allocated: number;
  readonly active: number;
  readonly requested: number;
  readonly active_allocated_block_bytes: number;
  readonly trace_actions_per_device: Record<string, number>[];
}

export const corpusDir = sharedFile('fixtures/torch-snapshots/corpus');
export const truth = JSON.parse(readFileSync(sharedFile('fixtures/torch-snapshots/corpus/truth.json'), 'utf8')) as Record<string, CorpusTruth>;
export const corpusFiles = readdirSync(corpusDir).filter((f) => f.endsWith('.pickle')).sort();
export const corpusPath = (name: string): string => join(corpusDir, name);

/** The Kineto traces beside the corpus. */
export const traceFiles = ['kineto_2021_resnet50.json.gz', 'kineto_modern_memory.json.gz'].map((f) => sharedFile(`fixtures/torch-traces/${f}`));

if (corpusFiles.length !== Object.keys(truth).length) {
  throw new Error(`the corpus has ${corpusFiles.length} pickles but truth.json describes ${Object.keys(truth).length}`);
}
