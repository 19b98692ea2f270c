// Traces recorded with _record_memory_history(skip_actions=[...]) (PyTorch 2.9+): with
// free_requested or free_completed skipped, every verb reads the trace as PyTorch would have
// written it whole. The transformer fixture completes each free at once (each free_requested is
// followed by its free_completed), so the file with either half stripped must read as the
// original does: the same statistics, the same replay.
import { describe, it, expect, afterAll } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fixture } from '../support/fixtures.js';
import { runNode } from '../support/child.js';
import { python } from './python.js';

const work = mkdtempSync(join(tmpdir(), 'memscope-skipped-frees-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const cliPath = join(import.meta.dirname, '../../dist/cli/memscope.cjs');
const original = fixture('torch/transformer_forward_trace.pickle');

/** The fixture without its `skipped` entries, written by CPython (as the allocator writes it with skip_actions=[skipped]). */
function without(skipped: string): string {
  const out = join(work, `no-${skipped}.pickle`);
  python(
    "import pickle, sys\ns = pickle.load(open(sys.argv[1], 'rb'))\ns['device_traces'] = [[e for e in t if e['action'] != sys.argv[3]] for t in s['device_traces']]\npickle.dump(s, open(sys.argv[2], 'wb'), protocol=4)",
    undefined,
    [original, out, skipped],
  );
  return out;
}

async function json(...args: string[]): Promise<Record<string, unknown>> {
  const r = await runNode([cliPath, ...args, '--json']);
  expect(r.stderr).toBe('');
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

type Summary = { devices: { stats: Record<string, number>; traceEvents: number }[]; warnings: string[] };
type Replay = { devices: Record<string, unknown>[]; warnings: string[] };

describe('a trace recorded with skip_actions', () => {
  it('a ring buffer that kept completions but not their allocations is not taken for one', async () => {
    // As real files with max_entries=1 hold: a free_completed whose request and alloc were dropped.
    const out = join(work, 'completions-only.pickle');
    python(
      "import pickle, sys\ns = pickle.load(open(sys.argv[1], 'rb'))\ns['device_traces'] = [[e for e in t if e['action'] == 'free_completed'][-3:] for t in s['device_traces']]\npickle.dump(s, open(sys.argv[2], 'wb'), protocol=4)",
      undefined,
      [original, out],
    );
    const summary = (await json('summary', out)) as Summary;
    expect(summary.warnings).toEqual([]);
    expect(summary.devices[0]!.traceEvents).toBe(3);
  });

  it.each([
    ['free_requested', 'a free_requested is taken to come just before each free_completed (1,155 added; event numbers count them)'],
    ['free_completed', 'each free_requested of a block not pending at the end is taken as completed at once (1,155 added; event numbers count them)'],
  ])('without %s: the statistics and the replay of the whole trace, and one warning saying so', async (skipped, said) => {
    const file = without(skipped);
    const whole = (await json('summary', original)) as Summary;
    const stripped = (await json('summary', file)) as Summary;
    expect(whole.warnings).toEqual([]);
    expect(stripped.warnings).toEqual([`device_traces[0]: no ${skipped} entry (recorded with skip_actions including "${skipped}"): ${said}`]);
    expect(stripped.devices[0]!.stats).toEqual(whole.devices[0]!.stats);
    expect(stripped.devices[0]!.stats['allocation.all.freed']).toBe(1155);
    const replayWhole = (await json('replay', original)) as Replay;
    const replayStripped = (await json('replay', file)) as Replay;
    expect(replayStripped.devices).toEqual(replayWhole.devices);
    expect(replayStripped.devices[0]!['verdict']).toBe('complete');
  });
});
