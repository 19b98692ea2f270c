// A snapshot holding a private pool's segment (segment_pool_id other than (0, 0): CUDA graphs,
// torch.compile's cudagraph trees, MemPool). PyTorch never serves an ordinary allocation from a
// private pool; memscope's model has the default pools only, so replay leaves such segments out,
// says so, and still matches PyTorch on the rest.
import { describe, it, expect, afterAll } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fixture } from '../support/fixtures.js';
import { runNode } from '../support/child.js';
import { python } from '../torch/python.js';

const work = mkdtempSync(join(tmpdir(), 'memscope-private-pools-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const cliPath = join(import.meta.dirname, '../../dist/cli/memscope.cjs');

/** The transformer fixture with one more segment: 20 MiB of graph pool (1, 0), all free, below the others. */
function withPrivatePool(): string {
  const out = join(work, 'private-pool.pickle');
  python(
    [
      'import pickle, sys',
      "s = pickle.load(open(sys.argv[1], 'rb'))",
      "addr = min(x['address'] for x in s['segments']) - (64 << 20)",
      "seg = {k: v for k, v in s['segments'][0].items() if k != 'blocks'}",
      "seg.update(address=addr, total_size=20 << 20, allocated_size=0, active_size=0, requested_size=0, segment_pool_id=(1, 0), segment_type='large', is_expandable=False)",
      "seg['blocks'] = [{'address': addr, 'size': 20 << 20, 'requested_size': 0, 'state': 'inactive', 'frames': []}]",
      "s['segments'].append(seg)",
      "pickle.dump(s, open(sys.argv[2], 'wb'), protocol=4)",
    ].join('\n'),
    undefined,
    [fixture('torch/transformer_forward_trace.pickle'), out],
  );
  return out;
}

describe('replay of a snapshot with a private pool', () => {
  const file = withPrivatePool();

  it('leaves the private segment out, matches PyTorch on the rest, and says so in the text and the JSON', async () => {
    const r = await runNode([cliPath, 'replay', file, '--json']);
    expect(r.status, r.stderr).toBe(0);
    const json = JSON.parse(r.stdout) as { warnings: string[]; devices: { allocAddresses: { rate: number }; segmentEvents: { rate: number }; finalSegments: { matched: number; total: number }; finalBlocks: { rate: number }; verdict: string }[] };
    const [d] = json.devices;
    // Served from the free 20 MiB private block, the first allocations landed where PyTorch never put them.
    expect([d!.allocAddresses.rate, d!.segmentEvents.rate, d!.finalBlocks.rate, d!.verdict]).toEqual([1, 1, 1, 'complete']);
    expect(d!.finalSegments).toMatchObject({ matched: 516, total: 516 });
    const said = 'replay leaves out 1 private-pool segment (segment_pool_id (1, 0): CUDA graphs, cudagraph trees or MemPool; memscope\'s model has the default pools only) and the 0 trace entries at their addresses; a private pool\'s segments released before the snapshot cannot be told apart and may show as mismatches';
    expect(json.warnings).toEqual([said]);
    const text = await runNode([cliPath, 'replay', file]);
    expect(text.stdout.endsWith(`notes:\n  ${said}\n`)).toBe(true);
  });
});
