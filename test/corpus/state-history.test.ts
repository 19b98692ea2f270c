// The report's Allocator State History model (src/viewer/app/state-history-model.ts) on every
// real snapshot of ../shared/fixtures/torch-snapshots/corpus: the segments and active blocks
// after event N equal CPython's reconstruction of the same pickle (test/viewer/state_history_truth.py)
// at the first, a middle and the last event of every traced device and before the first, reached
// through the model's checkpoints. Reads ../shared, so it belongs to the corpus run, not `npm test`.
import { describe, expect, it } from 'vitest';
import { openMemoryFile } from '../../src/torch/open-node.js';
import { snapshotToReport } from '../../src/viewer/torch-report.js';
import { DEFAULT_CAPS } from '../../src/viewer/report-data.js';
import { AllocatorHistory, stateSummary } from '../../src/viewer/app/state-history-model.js';
import { pythonStates } from '../viewer/state-history-truth.js';
import { corpusFiles, corpusPath, truth } from './corpus.js';

// A trace holding only `snapshot` entries is no history (the report shows the final state alone).
const traced = corpusFiles.filter((f) => truth[f].trace_actions_per_device.some((a) => Object.keys(a).some((k) => k !== 'snapshot')));

describe('allocator state history on the real-snapshot corpus', () => {
  it('has traced files to check', () => {
    expect(traced.length).toBeGreaterThan(20);
  });

  it.each(traced)('%s: the state at several events equals CPython\u2019s', async (file) => {
    const path = corpusPath(file);
    const f = await openMemoryFile(path);
    if (f.kind !== 'snapshot') throw new Error('expected a snapshot');
    const history = snapshotToReport(f.snapshot, path, DEFAULT_CAPS).history!;
    const devices = history.devices.filter((d) => d.events.action.length > 0);
    expect(devices.length).toBeGreaterThan(0);
    for (const dev of devices) {
      const n = dev.events.action.length;
      const events = [...new Set([n - 1, Math.floor(n / 2), Math.floor(n / 3) + 1, 0, -1])];
      const want = pythonStates(path, Number(dev.device.split(':')[1]), events);
      // A short interval, so the visits go through restored checkpoints and single steps both ways.
      const model = new AllocatorHistory(dev, history.actions, 64);
      for (const e of events) {
        model.goTo(e);
        expect(stateSummary(model), `${dev.device} after event ${e}`).toEqual(want[String(e)]);
      }
    }
  });
});
