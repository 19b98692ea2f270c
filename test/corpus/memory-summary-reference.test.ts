// memscope's memory_summary table against PyTorch's own memory_summary code (torch/cuda/memory.py,
// from the reference in ../shared/reference/pytorch), run by python3 on the same stats. It reads
// ../shared, so it belongs to the corpus run, not `npm test`.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DeviceMemory } from '../../src/allocator/api.js';
import { renderMemorySummary } from '../../src/allocator/summary.js';
import { sharedFile } from '../support/fixtures.js';

const MiB = 1024 * 1024;

/** The stat keys of a device that has done a little of everything. */
function knownSequence(): DeviceMemory {
  const m = new DeviceMemory({ settings: 'max_split_size_mb:64', capacity: 16 * 1024 * MiB });
  m.cachingAllocatorAlloc(1000);
  m.cachingAllocatorDelete(m.cachingAllocatorAlloc(100 * MiB));
  return m;
}

describe('memory_summary', () => {
  it("is what PyTorch's own memory_summary code prints for the same stats, at every unit scale", () => {
    // PyTorch's function is run from the spec file on stats whose values span B..PiB and 1..10^9 counts.
    const keys = Object.keys(knownSequence().memoryStats());
    let seed = 7;
    const next = (): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const samples: Record<string, number>[] = [];
    for (let k = 0; k < 12; k++) {
      const stats: Record<string, number> = {};
      for (const key of keys) stats[key] = Math.floor(next() * 10 ** (1 + ((k + key.length) % 16)));
      samples.push(stats);
    }
    const dir = mkdtempSync(join(tmpdir(), 'memscope-alloc-'));
    const statsPath = join(dir, 'stats.json');
    writeFileSync(statsPath, JSON.stringify(samples));
    const script = String.raw`
import json, sys, typing
src = open(sys.argv[1], encoding="utf8").read()
code = src[src.index("def memory_summary("):src.index("def list_gpu_processes(")]
# The spec file follows the function's return with a translated comment; cut at the return.
code = code[:code.rindex('return "|"')] + 'return "|" + "|\\n|".join(lines).format(**fmt_dict) + "|\\n"\n'
out = []
for stats in json.load(open(sys.argv[2])):
    ns = {"Union": typing.Union, "Device": object, "_get_device_index": lambda d, optional=False: 0, "memory_stats": lambda device=None, s=stats: s}
    exec(code, ns)
    out.append([ns["memory_summary"](0, False), ns["memory_summary"](0, True)])
sys.stdout.write(json.dumps(out))
`;
    const expected: [string, string][] = JSON.parse(
      execFileSync('python3', ['-c', script, sharedFile('reference/pytorch/003_0b8f84261bb4ab90.txt'), statsPath], { encoding: 'utf8' }),
    );
    expect(expected).toHaveLength(samples.length);
    samples.forEach((stats, i) => {
      expect(renderMemorySummary(stats, 0, false)).toBe(expected[i][0]);
      expect(renderMemorySummary(stats, 0, true)).toBe(expected[i][1]);
    });
    const all = expected.map((e) => e[0]).join('');
    for (const unit of [' B   |', ' KiB |', ' MiB |', ' GiB |', ' TiB |', ' K  |', ' M  |']) expect(all).toContain(unit);
  });

});
