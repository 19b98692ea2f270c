// The report page's embedded data: its number columns travel as (deflated) bytes and come back as
// they went in; a small report's JSON stays readable; a damaged page is refused with one line.
import { describe, it, expect } from 'vitest';
import { MemscopeError } from '../../src/core/errors.js';
import { inflateRawSync } from 'node:zlib';
import { base64, embedReportData, readEmbeddedReport, readEmbeddedReportInStages } from '../../src/viewer/report-embed.js';
import { nodeEmbedCodec } from '../../src/viewer/report-embed-node.js';
import type { ReportData } from '../../src/viewer/report-data.js';

const col = (n: number, f: (i: number) => number): number[] => Array.from({ length: n }, (_, i) => f(i));

/** Report data with columns of every kind: small and huge integers, rising addresses, fractions, short arrays. */
function sample(n: number): ReportData {
  const edge = [0, 1, -1, 63, 64, -64, -65, 127, 128, 8191, 8192, 2 ** 28 - 1, 2 ** 28, 2 ** 31, -(2 ** 31) - 1, 2 ** 40 + 3, -(2 ** 45), 2 ** 51 - 1, -(2 ** 51) + 1];
  return {
    version: 2,
    title: 'sample',
    timeline: { dt: col(n, (i) => (i % 7) + 0.25), series: col(n, (i) => i % 3), bytes: col(n, (i) => (i % 2 ? -1 : 1) * 4096 * i) },
    strings: ['', 'a.py:1:f'],
    stacks: [[1], col(70, () => 1)],
    memory: {
      devices: [
        {
          device: 'cuda:0',
          eventDt: col(n, (i) => i * 3),
          start: col(n, (i) => i - 1),
          end: col(n, (i) => (i % 5 ? i + 10 : -1)),
          bytes: col(n, (i) => edge[i % edge.length]!),
          address: col(n, (i) => 0x7f0000000000 + 512 * i),
          stack: col(n, (i) => (i % 4) - 1),
          site: col(n, (i) => i % 9),
          reservedBase: 5,
          reservedAt: [1, 2],
          reservedDelta: [2 ** 21, -(2 ** 21)],
          peakAllocated: 1,
          peakReserved: 2,
        },
      ],
      stackFolded: col(n, (i) => i % 2),
    },
    flames: [{ title: 'memory', unit: 'B', names: ['<root>'], name: col(n, () => 0), depth: col(n, (i) => i % 5), value: col(n, (i) => i * 1000), offset: col(n, (i) => i * 10), dropped: 0 }],
  } as unknown as ReportData;
}

/** The page's JSON as the HTML parser hands it to the app. */
const pageText = (data: ReportData, codec = nodeEmbedCodec): string => JSON.stringify(embedReportData(data, codec));

describe('embedded report data', () => {
  it('gives every column back exactly, deflated or not', async () => {
    const data = sample(500);
    for (const codec of [nodeEmbedCodec, { base64 }]) expect(await readEmbeddedReport(pageText(data, codec))).toEqual(data);
  });

  it('moves every long number column out of the JSON, leaving the rest readable', () => {
    const page = embedReportData(sample(500), nodeEmbedCodec) as Record<string, any>;
    expect(page.title).toBe('sample');
    expect(page.$columns.encoding).toBe('deflate-raw');
    const dev = page.memory.devices[0];
    expect(dev.address.$col).toBe('zd');
    expect(dev.site.$col).toBe('z');
    expect(page.timeline.dt.$col).toBe('f64');
    expect(page.flames[0].offset.$col).toBe('zd');
    // Short arrays stay JSON.
    expect(dev.reservedAt).toEqual([1, 2]);
    expect(page.stacks[0]).toEqual([1]);
    // Rising addresses take about two bytes each, before deflating.
    expect(dev.address.len).toBeLessThan(3 * 500);
  });

  it('packs a large report whole, head included, and reads it back', async () => {
    const data = { ...sample(20_000), strings: Array.from({ length: 40_000 }, (_, i) => `file_${i}.py:${i}:fn`) } as unknown as ReportData;
    const page = embedReportData(data, nodeEmbedCodec) as Record<string, any>;
    expect(Object.keys(page)).toEqual(['$packed']);
    const text = JSON.stringify(page);
    expect(text.length).toBeLessThan(JSON.stringify(data).length / 4);
    expect(await readEmbeddedReport(text)).toEqual(data);
  });

  it('puts the columns the chart\'s first frame reads in the first buffer, and gives them before the rest is read', async () => {
    const data = { ...sample(20_000), strings: Array.from({ length: 40_000 }, (_, i) => `file_${i}.py:${i}:fn`) } as unknown as ReportData;
    const { $packed: packed } = embedReportData(data, nodeEmbedCodec) as { $packed: { head: number; bytes: number; b64: string; rest: { bytes: number; b64?: string } } };
    const first = inflateRawSync(Buffer.from(packed.b64, 'base64'));
    expect(first.length).toBe(packed.bytes);
    const head = JSON.parse(first.subarray(0, packed.head).toString('utf8'));
    const firstEnd = packed.bytes - packed.head;
    expect(firstEnd).toBeGreaterThan(0);
    expect(inflateRawSync(Buffer.from(packed.rest.b64!, 'base64')).length).toBe(packed.rest.bytes);
    expect(packed.rest.bytes).toBeGreaterThan(firstEnd);
    // Each column and part, with where it lies: in the first buffer exactly when the first frame reads it.
    const places: [string, { at: number; len: number }][] = [];
    const walk = (v: unknown, path: string): void => {
      if (!v || typeof v !== 'object') return;
      if ('$col' in v) places.push([path, v as unknown as { at: number; len: number }]);
      else if ('$json' in v) places.push([path, (v as { $json: { at: number; len: number } }).$json]);
      else for (const [k, x] of Object.entries(v)) walk(x, path ? `${path}.${k}` : k);
    };
    walk(head, '');
    const drawn = /^(memory\.devices\.0\.(eventDt|start|end|bytes|site)|timeline\.(dt|series|bytes))$/;
    expect(places.filter(([p]) => drawn.test(p)).map(([p]) => p).sort()).toEqual(['memory.devices.0.bytes', 'memory.devices.0.end', 'memory.devices.0.eventDt', 'memory.devices.0.site', 'memory.devices.0.start', 'timeline.bytes', 'timeline.dt', 'timeline.series']);
    for (const [path, { at, len }] of places) {
      if (drawn.test(path)) expect(at + len, path).toBeLessThanOrEqual(firstEnd);
      else expect(at, path).toBeGreaterThanOrEqual(firstEnd);
    }
    // In stages, the rest given apart as the page gives it: the first frame's columns read before it is asked for.
    const { b64: restB64, ...restRef } = packed.rest;
    let asked = 0;
    const staged = await readEmbeddedReportInStages(JSON.stringify({ $packed: { ...packed, rest: restRef } }), undefined, async () => {
      asked++;
      return restB64!;
    });
    expect(staged.data.memory!.devices[0]!.site).toEqual(data.memory!.devices[0]!.site);
    await staged.complete;
    expect(asked).toBe(1);
    expect(staged.data).toEqual(data);
    // Without the rest, the page says so when its parts are read.
    const missing = await readEmbeddedReportInStages(JSON.stringify({ $packed: { ...packed, rest: restRef } }));
    await expect(missing.complete).rejects.toThrow(/\$packed\.rest is not in the page/);
    expect(() => missing.data.strings).toThrow(/was read before the page finished reading it/);
  });

  it('keeps a report without long columns as plain JSON', async () => {
    const data = { version: 2, title: 't', timeline: { dt: [1, 2], series: [0, 0], bytes: [4, -4] }, memory: null } as unknown as ReportData;
    expect(embedReportData(data, nodeEmbedCodec)).toEqual(data);
    expect(await readEmbeddedReport(JSON.stringify(data))).toEqual(data);
  });

  it('refuses a damaged page with one line naming what is wrong', async () => {
    const page = embedReportData(sample(300), { base64 }) as Record<string, any>;
    const damaged = async (mutate: (p: Record<string, any>) => void): Promise<string> => {
      const copy = JSON.parse(JSON.stringify(page));
      mutate(copy);
      const err = await readEmbeddedReport(JSON.stringify(copy)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(MemscopeError);
      return (err as Error).message;
    };
    expect(await damaged((p) => (p.memory.devices[0].site.at = 1e9))).toMatch(/memory\.devices\[0\]\.site points outside the embedded columns/);
    expect(await damaged((p) => (p.$columns.b64 = '*' + p.$columns.b64))).toMatch(/\$columns is not base64/);
    expect(await damaged((p) => (p.$columns.bytes += 1))).toMatch(/\$columns holds \d+ bytes, not \d+/);
    expect(await damaged((p) => (p.$columns.encoding = 'deflate-raw'))).toMatch(/\$columns does not inflate/);
    expect(await damaged((p) => (p.timeline.series.$col = 'q'))).toMatch(/timeline\.series is not a column/);
    await expect(readEmbeddedReport('{"title": ')).rejects.toThrow(/the embedded report data is damaged: it is not JSON/);
  });

  it('finds a column\'s damaged bytes when the page reads it, and says so before the read throws', async () => {
    const page = embedReportData(sample(300), { base64 }) as Record<string, any>;
    page.memory.devices[0].bytes.n += 1;
    const told: unknown[] = [];
    const data = await readEmbeddedReport(JSON.stringify(page), (e) => told.push(e));
    // Columns not read are not decoded: the page opens.
    expect(data.memory!.devices[0]!.site).toHaveLength(300);
    expect(told).toEqual([]);
    expect(() => data.memory!.devices[0]!.bytes).toThrow(/memory\.devices\[0\]\.bytes holds 300 values, not 301/);
    expect(told).toHaveLength(1);
    expect(told[0]).toBeInstanceOf(MemscopeError);
  });
});
