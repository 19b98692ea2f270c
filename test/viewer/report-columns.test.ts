// The report page's packed number columns: every integer a double holds exactly comes back as
// it went in, columns that are not integers stay JSON, and a damaged column is refused.
import { describe, it, expect } from 'vitest';
import { packColumn, packReportData, unpackColumn, unpackReportData } from '../../src/viewer/report-columns.js';
import type { ReportData } from '../../src/viewer/report-data.js';

describe('packed report columns', () => {
  it('round-trip integers of every size and sign, choosing differences when they are shorter', () => {
    const edge = [0, 1, -1, 63, 64, -64, -65, 127, 128, 8191, 8192, 2 ** 28 - 1, 2 ** 28, 2 ** 31, -(2 ** 31) - 1, 2 ** 40 + 3, -(2 ** 45), 2 ** 51 - 1, -(2 ** 51) + 1];
    const rising = Array.from({ length: 5000 }, (_, i) => 0x7f0000000000 + i * 512);
    for (const xs of [[], [7], edge, rising]) {
      const packed = packColumn(xs);
      expect(Array.isArray(packed)).toBe(false);
      expect(unpackColumn(packed, 'x')).toEqual(xs);
    }
    const r = packColumn(rising) as { $col: string; b64: string };
    expect(r.$col).toBe('zd');
    // Two bytes per address instead of 15 characters of JSON.
    expect(r.b64.length).toBeLessThan(JSON.stringify(rising).length / 5);
  });

  it('leave a column with fractions or huge values as it is', () => {
    expect(packColumn([1.5, 2])).toEqual([1.5, 2]);
    expect(packColumn([2 ** 52])).toEqual([2 ** 52]);
    expect(unpackColumn([3, 4], 'x')).toEqual([3, 4]);
  });

  it('refuse a damaged column, naming it', () => {
    const good = packColumn([1, 2, 3]) as { $col: 'z'; n: number; b64: string };
    expect(() => unpackColumn({ ...good, n: 4 }, 'memory.devices[0].bytes')).toThrow(/memory.devices\[0\].bytes holds 3 values, not 4/);
    expect(() => unpackColumn({ ...good, b64: 'A*' }, 'timeline.dt')).toThrow(/timeline.dt has a character outside base64/);
    expect(() => unpackColumn({ $col: 'q', n: 1, b64: '' } as never, 'timeline.dt')).toThrow(/timeline.dt is not a column/);
  });

  it('pack the long columns of report data and give the same data back', () => {
    const n = 300;
    const col = (f: (i: number) => number) => Array.from({ length: n }, (_, i) => f(i));
    const data = {
      version: 2,
      timeline: { dt: col((i) => i % 7), series: col((i) => i % 3), bytes: col((i) => (i % 2 ? -1 : 1) * 4096 * i) },
      memory: {
        devices: [
          {
            device: 'cuda:0',
            eventDt: col((i) => i * 3),
            start: col((i) => i - 1),
            end: col((i) => (i % 5 ? i + 10 : -1)),
            bytes: col((i) => 512 * (i + 1)),
            address: col((i) => 2 ** 40 + 512 * i),
            stack: col((i) => (i % 4) - 1),
            site: col((i) => i % 9),
            reservedBase: 5,
            reservedAt: [1, 2],
            reservedDelta: [2 ** 21, -(2 ** 21)],
            peakAllocated: 1,
            peakReserved: 2,
          },
        ],
        stackFolded: col((i) => i % 2),
      },
    } as unknown as ReportData;
    const packed = JSON.parse(JSON.stringify(packReportData(data)));
    expect(packed.memory.devices[0].address.$col).toBe('zd');
    expect(packed.timeline.bytes.$col).toBeDefined();
    expect(unpackReportData(packed)).toEqual(data);
  });

  it('pack the columns of the state history, one level down, and give them back', () => {
    const n = 200;
    const col = (f: (i: number) => number) => Array.from({ length: n }, (_, i) => f(i));
    const history = {
      actions: ['alloc', 'free_requested', 'free_completed'],
      allocatorSettings: null,
      devices: [
        {
          device: 'cuda:0',
          memory: 0,
          segments: [{ address: 2 ** 40, size: 2 ** 21, stream: 0, pool: null, expandable: false, kind: 'large' }],
          blocks: { address: col((i) => 2 ** 40 + 512 * i), size: col(() => 512), requested: col(() => 500), pending: col(() => 0), stack: col((i) => i % 3) },
          events: { action: col((i) => i % 3), addr: col((i) => i >> 1), size: col((i) => 512 * (i % 7)), stream: col(() => 0), stack: col((i) => (i % 4) - 1) },
          addresses: col((i) => 2 ** 40 + 512 * i),
          streams: [0],
          ooms: { event: [], deviceFree: [] },
        },
      ],
    };
    const data = { version: 2, timeline: { dt: [], series: [], bytes: [] }, memory: null, history } as unknown as ReportData;
    const packed = JSON.parse(JSON.stringify(packReportData(data)));
    expect(packed.history.devices[0].events.action.$col).toBeDefined();
    expect(packed.history.devices[0].blocks.address.$col).toBe('zd');
    expect(packed.history.devices[0].addresses.$col).toBe('zd');
    expect(JSON.stringify(packed).length).toBeLessThan(JSON.stringify(data).length / 2);
    expect(unpackReportData(packed)).toEqual(data);
  });
});
