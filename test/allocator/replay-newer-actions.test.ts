// Trace actions newer than memscope's replay: PyTorch main's `annotate` (metadata on a live
// allocation, torch.cuda.memory._annotate_memory) and any action a later PyTorch may add. Replay
// takes the file, as every other verb does: annotate is replayed as the nothing it is, an unknown
// action is skipped with a warning that says what that risks.
import { describe, it, expect, afterAll } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fixture } from '../support/fixtures.js';
import { runNode } from '../support/child.js';
import { python } from '../torch/python.js';

const work = mkdtempSync(join(tmpdir(), 'memscope-newer-actions-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const cliPath = join(import.meta.dirname, '../../dist/cli/memscope.cjs');
const cli = (...args: string[]) => runNode([cliPath, ...args]);

/** The transformer fixture with an `annotate` entry after its first alloc and an unknown action after its second, written by CPython. */
function withNewerActions(): string {
  const out = join(work, 'newer-actions.pickle');
  python(
    [
      'import pickle, sys',
      "s = pickle.load(open(sys.argv[1], 'rb'))",
      't = s["device_traces"][0]',
      'allocs = [i for i, e in enumerate(t) if e["action"] == "alloc"]',
      'a = t[allocs[0]]',
      'b = t[allocs[1]]',
      't.insert(allocs[1] + 1, {"action": "frobnicate", "addr": b["addr"], "size": 0, "stream": 0, "time_us": b["time_us"]})',
      't.insert(allocs[0] + 1, {"action": "annotate", "addr": a["addr"], "size": a["size"], "stream": a["stream"], "time_us": a["time_us"], "user_metadata": "packed for backward"})',
      "pickle.dump(s, open(sys.argv[2], 'wb'), protocol=4)",
    ].join('\n'),
    undefined,
    [fixture('torch/transformer_forward_trace.pickle'), out],
  );
  return out;
}

describe('replay of trace actions newer than its own', () => {
  const file = withNewerActions();

  it('annotate replays as nothing; an unknown action is skipped with one warning; the replay still matches PyTorch', async () => {
    const r = await cli('replay', file, '--json');
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const json = JSON.parse(r.stdout) as { warnings: string[]; devices: { traceEvents: number; allocAddresses: { rate: number }; segmentEvents: { rate: number }; finalBlocks: { rate: number }; verdict: string }[] };
    const [d] = json.devices;
    expect(d!.traceEvents).toBe(4659);
    expect([d!.allocAddresses.rate, d!.segmentEvents.rate, d!.finalBlocks.rate, d!.verdict]).toEqual([1, 1, 1, 'complete']);
    const replayWarnings = json.warnings.filter((w) => w.startsWith('replay skips'));
    expect(replayWarnings).toEqual(['replay skips the 1 trace entry of action "frobnicate", unknown to memscope: if it changes memory, replay mismatches from the first of them']);
    expect(json.warnings.join('\n')).not.toMatch(/annotate/);
    // Every replay mode takes it.
    for (const args of [['--capacity', '1GiB'], ['--allocator', 'cudaMallocAsync']]) expect((await cli('replay', file, ...args)).status, args.join(' ')).toBe(0);
  });

  it("trace shows the annotation's text on the allocation it names", async () => {
    const r = await cli('trace', file);
    expect(r.status).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines[3]).toBe('# annotate b: "packed for backward"');
  });
});
