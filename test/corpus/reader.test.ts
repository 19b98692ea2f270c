// Every real snapshot of the corpus: read by the fast path (whole, and in pieces as the CLI
// reads files) and by the general path with identical models, and with CPython's figures.
import { describe, it, expect, afterEach } from 'vitest';
import { readFileSync } from 'node:fs';
import { readPickle, type PickleValue } from '../../src/torch/pickle/reader.js';
import { readerOf, readSnapshotPieces } from '../../src/torch/snapshot-decoder.js';
import { readSnapshotFile } from '../../src/torch/snapshot-node.js';
import { normaliseSnapshot, readSnapshot, type MemorySnapshot } from '../../src/torch/index.js';
import { resolved } from '../torch/resolved-snapshot.js';
import { corpusFiles, corpusPath, truth, type CorpusTruth } from './corpus.js';

/** The figures truth.json holds, from memscope's model. */
function figures(s: MemorySnapshot): CorpusTruth {
  const sum = (f: (g: MemorySnapshot['segments'][number]) => number): number => s.segments.reduce((a, g) => a + f(g), 0);
  const allocatedState = s.stateNames.indexOf('active_allocated');
  let blockBytes = 0;
  for (let i = 0; i < s.blocks.count; i++) if (s.blocks.state[i] === allocatedState) blockBytes += s.blocks.size[i]!;
  return {
    segments: s.segments.length,
    blocks: s.blocks.count,
    reserved: sum((g) => g.totalSize),
    allocated: sum((g) => g.allocatedSize),
    active: sum((g) => g.activeSize),
    requested: sum((g) => g.requestedSize ?? 0),
    active_allocated_block_bytes: blockBytes,
    trace_actions_per_device: s.traces.map((t) => {
      const counts: Record<string, number> = {};
      for (let i = 0; i < t.count; i++) {
        const a = s.actionNames[t.action[i]!]!;
        counts[a] = (counts[a] ?? 0) + 1;
      }
      return counts;
    }),
  };
}

/**
 * PyTorch 2.0 blocks have no address; memscope places each after the blocks before it. The file
 * records where each allocated block's allocation was made (`history[0].addr`): they must agree.
 */
function expectAddressesMatchHistory(s: MemorySnapshot, raw: PickleValue): void {
  const segments = (raw as Map<string, PickleValue>).get('segments') as Map<string, PickleValue>[];
  const allocatedState = s.stateNames.indexOf('active_allocated');
  let row = 0;
  let checked = 0;
  for (const seg of segments) {
    for (const block of seg.get('blocks') as Map<string, PickleValue>[]) {
      const history = block.get('history') as Map<string, PickleValue>[] | undefined;
      if (s.blocks.state[row] === allocatedState && history && history.length > 0) {
        expect(s.blocks.address[row]).toBe(history[0]!.get('addr'));
        checked++;
      }
      row++;
    }
  }
  expect(row).toBe(s.blocks.count);
  expect(checked).toBeGreaterThan(0);
}

const TRUTH_KEYS = ['segments', 'blocks', 'reserved', 'allocated', 'active', 'requested', 'active_allocated_block_bytes', 'trace_actions_per_device'] as const;

// Each test runs seconds of synchronous work: a turn of the event loop after each lets the worker
// answer vitest's messages, which time out (failing the run) on a loaded machine otherwise.
afterEach(() => new Promise<void>((done) => setTimeout(done, 0)));

describe('the corpus of real snapshots', () => {
  it('is all there', () => {
    expect(corpusFiles.length).toBe(34);
  });

  for (const name of corpusFiles) {
    it(`${name}: fast and general paths give one model, with CPython's figures`, () => {
      const bytes = new Uint8Array(readFileSync(corpusPath(name)));
      const fast = readSnapshot(bytes);
      const general = normaliseSnapshot(readPickle(bytes));
      const pieces = readSnapshotFile(corpusPath(name));
      const want = truth[name]!;
      const got = figures(fast);
      expect(Object.fromEntries(TRUTH_KEYS.map((k) => [k, got[k]]))).toEqual(Object.fromEntries(TRUTH_KEYS.map((k) => [k, want[k]])));
      const expected = resolved(general);
      expect(resolved(fast)).toEqual(expected);
      expect(resolved(pieces)).toEqual(expected);
      if (fast.format.legacyBlockHistory) expectAddressesMatchHistory(fast, readPickle(bytes));
    });

    it(`${name}: the fast path reads it itself, without falling back to the general path`, () => {
      // A fault in the fast path falls back rather than failing the read: the differential test
      // above would then compare the general path with itself.
      const bytes = new Uint8Array(readFileSync(corpusPath(name)));
      let starts = 0;
      readSnapshotPieces((into, offset) => {
        if (offset === 0) starts++;
        return readerOf(bytes)(into, offset);
      }, bytes.length);
      expect(starts).toBe(1);
    });
  }
});
