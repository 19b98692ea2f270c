// The report's module tree from a capture whose module records are deep or damaged.
import { describe, expect, it } from 'vitest';
import { CapturedAllocs, type Capture, type CapturedModule } from '../../src/capture/reader.js';
import { captureToReport, DEFAULT_CAPS } from '../../src/viewer/report-data.js';

function captureWith(modules: CapturedModule[]): Capture {
  return {
    header: { version: 1, created: '2026-01-01', argv: [], backend: null, stacks: false, maxEntries: null } as unknown as Capture['header'],
    allocs: new CapturedAllocs(['']),
    eventCount: 0,
    modules,
    steps: [],
    marks: [],
    kernels: [],
    stacks: new Map(),
    end: null,
    truncated: null,
    unmatchedFrees: 0,
  };
}

const module = (id: number, parentId: number, path = `m${id}`): CapturedModule => ({ id, path, className: 'Linear', parentId, states: null });

describe('report module tree', () => {
  it('a chain 5,000 modules deep is placed in order, each one level under its parent', () => {
    const chain = Array.from({ length: 5000 }, (_, i) => module(i + 1, i === 0 ? -1 : i));
    const data = captureToReport(captureWith(chain.slice().reverse()), 'deep.ndjson', DEFAULT_CAPS);
    expect(data.modules.map((m) => m.path)).toEqual(chain.map((m) => m.path));
    expect(data.modules.map((m) => m.depth)).toEqual(chain.map((_, i) => i));
  });

  it('siblings by natural path order, children right after their parent', () => {
    const data = captureToReport(captureWith([module(3, 1, 'a.b10'), module(1, -1, 'a'), module(2, 1, 'a.b2'), module(4, 2, 'a.b2.c')]), 'x.ndjson', DEFAULT_CAPS);
    expect(data.modules.map((m) => `${m.depth}:${m.path}`)).toEqual(['0:a', '1:a.b2', '2:a.b2.c', '1:a.b10']);
  });

  it('a module that is its own parent, or a loop of parents, is listed once at the top level with a notice', () => {
    const data = captureToReport(
      captureWith([module(1, -1, 'root'), module(2, 2, 'self'), module(3, 4, 'loop.a'), module(4, 3, 'loop.b'), module(-1, -1, 'root-of-itself')]),
      'cycle.ndjson',
      DEFAULT_CAPS,
    );
    const paths = data.modules.map((m) => m.path);
    expect(paths.slice().sort()).toEqual(['loop.a', 'loop.b', 'root', 'root-of-itself', 'self']);
    expect(new Set(paths).size).toBe(paths.length);
    expect(data.notices.some((n) => /3 module\(s\) are not under the root: their parent chain loops/.test(n))).toBe(true);
  });
});
