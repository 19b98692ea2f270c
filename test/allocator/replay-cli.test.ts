import { afterEach, describe, expect, it, vi } from 'vitest';
import { byteSize } from '../../src/cli/options.js';
import { fixture } from '../support/fixtures.js';
import { runReplay } from '../support/replay-cli.js';

const FILE = fixture('torch/newest_format_trace.pickle');

const run = runReplay;

afterEach(() => vi.restoreAllMocks());

describe('memscope replay', () => {
  it('--json reports the match rates per device', async () => {
    const report = JSON.parse(await run(FILE, '--json'));
    expect(report.file).toBe(FILE);
    expect(report.devices[0]).toMatchObject({
      device: 0,
      traceEvents: 5163,
      allocs: 1721,
      allocAddresses: { matched: 1721, total: 1721, rate: 1 },
      finalBlocks: { rate: 1 },
      mismatches: [],
    });
  }, 30_000);

  it('what-if answers "would expandable_segments:True have saved my run?" (here: yes, on a 13 GiB device)', async () => {
    const text = await run(FILE, '--capacity', '13GiB', '--alloc-conf', 'expandable_segments:True');
    expect(text).toContain('capacity 13.00 GiB');
    // Recorded settings need 13.12 GiB at peak and run out of memory; expandable segments peak at 12.98 GiB.
    expect(text).toMatch(/│ out of memory\s+│ yes, at trace event \d+ \([\d.]+ [KMG]iB\) │\s+no │/);
    expect(text).not.toContain('what-if OOM');
    const json = JSON.parse(await run(FILE, '--capacity', '13GiB', '--alloc-conf', 'expandable_segments:True', '--json'));
    expect(json.recorded.oom.message).toMatch(/^CUDA out of memory\. Tried to allocate .* GPU 0 has a total capacity of 13\.00 GiB/);
    expect(json.whatIf.oom).toBeNull();
    expect(json.whatIf.peakReservedBytes).toBeLessThan(13 * 1024 ** 3);
  }, 30_000);

  it('reads sizes with binary units and rejects nonsense', () => {
    expect(byteSize('16GiB', '--capacity')).toBe(16 * 1024 ** 3);
    expect(byteSize('1.5 G', '--capacity')).toBe(1.5 * 1024 ** 3);
    expect(byteSize('4096', '--capacity')).toBe(4096);
    expect(() => byteSize('lots', '--capacity')).toThrow(/--capacity must be a size in bytes .* got "lots"/);
  });
});
