// The query "alive@peak group:user_frame" (docs/QUERY.md) on every real snapshot of the corpus,
// against CPython's answer (test/viewer/query_truth.py); and the inferred categories on the
// corpus files whose stacks carry the frames each rule reads. Reads ../shared: the corpus run.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readSnapshotFile } from '../../src/torch/snapshot-node.js';
import { snapshotToReport } from '../../src/viewer/torch-report.js';
import { DEFAULT_CAPS } from '../../src/viewer/report-data.js';
import { query } from '../../src/viewer/query.js';
import { repoRoot } from '../support/fixtures.js';
import { corpusFiles, corpusPath } from './corpus.js';

type Truth = Record<string, { peak: number; groups: Record<string, [number, number]> }>;

function pythonTruth(file: string): Promise<Truth> {
  return new Promise((resolve, reject) => {
    const child = spawn('python3', [join(repoRoot, 'test/viewer/query_truth.py'), file]);
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(out) as Truth) : reject(new Error(err))));
  });
}

describe('query on the real-snapshot corpus', () => {
  it.each(corpusFiles)('%s: "alive@peak group:user_frame" equals CPython', async (name) => {
    const file = corpusPath(name);
    const want = await pythonTruth(file);
    const data = snapshotToReport(readSnapshotFile(file), file, DEFAULT_CAPS);
    const traced = data.memory!.devices.filter((d) => d.eventDt.length > 0);
    expect(traced.map((d) => d.device)).toEqual(Object.keys(want).map((k) => `cuda:${k}`));
    for (const d of traced) {
      const w = want[d.device.slice('cuda:'.length)]!;
      const r = query(data, `device=${d.device} alive@peak group:user_frame top:1000000`);
      expect(r.bytes).toBe(w.peak);
      expect(Object.fromEntries(r.groups!.map((g) => [g.key, [g.count, g.bytes]]))).toEqual(w.groups);
    }
  });

  it.each([
    ['Wedsonlin+assignment2-systems__medium_128_training_memory_snapshot.pickle', ['gradient', 'optimizer_state', 'activation', 'parameter']],
    ['notHanmin+assignment2-systems__memory_snapshot_96f7f9.pickle', ['optimizer_state', 'activation', 'parameter']],
    ['jogregoire+How-Diffusion-Models-Work__my_snapshot.pickle', ['parameter']],
  ])('%s: the categories its stacks support', (name, categories) => {
    const data = snapshotToReport(readSnapshotFile(corpusPath(name)), name, DEFAULT_CAPS);
    const found = new Set(query(data, 'group:category top:100').groups!.map((g) => g.key));
    for (const c of categories) expect(found, c).toContain(c);
    // Each gradient is made under AccumulateGrad; each optimizer state under torch/optim.
    expect(query(data, 'category=gradient -frame:AccumulateGrad').count).toBe(0);
    expect(query(data, 'category=optimizer_state -before_trace -frame:torch/optim/').count).toBe(0);
  });
});
