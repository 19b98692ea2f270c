// memscope replay reads pickles through the columnar snapshot reader (readReplaySnapshot); it must
// give exactly what the generic plain-object path (readSnapshotFile + parseSnapshot) gives.
import { describe, expect, it, vi } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { readReplaySnapshot, readSnapshotFile } from '../../src/allocator/read-snapshot-node.js';
import { parseAllocatorConf } from '../../src/allocator/settings.js';
import { parseSnapshot, replaySnapshot, whatIf, type ParsedSnapshot } from '../../src/allocator/replay.js';
import { MemscopeError } from '../../src/core/errors.js';
import { writePickle } from '../../src/torch/pickle/writer.js';
import { fixture } from '../support/fixtures.js';

vi.setConfig({ testTimeout: 120_000 });

const tmp = mkdtempSync(path.join(tmpdir(), 'memscope-replay-input-'));

/**
 * What a parsed snapshot says: segments, settings and each trace entry. The columns behind the
 * entries differ in what no entry shows (the columnar reader's NaN for an absent time or address,
 * its typed-array views), so they are compared through the entries made from them.
 */
function parsedView(p: ParsedSnapshot): Omit<ParsedSnapshot, 'columns'> {
  return { segments: p.segments, traces: p.traces, settings: p.settings, hasSettings: p.hasSettings, warnings: [] };
}

describe('readReplaySnapshot (columnar reader) against the plain-object path', () => {
  it.each(['transformer_forward_trace.pickle', 'transformer_fullstep_trace.pickle', 'newest_format_trace.pickle', 'older_no_settings_6633blocks.pickle', 'small_3seg.pickle', 'state_only_259seg.pickle'])(
    '%s: same parsed snapshot, same replay report',
    (name) => {
      const file = fixture(`torch/${name}`);
      const generic = parseSnapshot(readSnapshotFile(file));
      const fast = readReplaySnapshot(file);
      expect(parsedView(fast)).toEqual(parsedView(generic));
      expect(replaySnapshot(fast)).toEqual(replaySnapshot(readSnapshotFile(file)));
    },
  );

  it('what-if runs give the same figures from either reader', () => {
    const file = fixture('torch/transformer_forward_trace.pickle');
    const fast = readReplaySnapshot(file);
    const settings = parseAllocatorConf('expandable_segments:True');
    expect(whatIf(fast, settings, null)).toEqual(whatIf(readSnapshotFile(file), settings, null));
  });

  it.each(['replay_expandable.pickle', 'replay_implied_size.pickle', 'replay_contradiction.pickle'])('%s (hand-made): same parsed snapshot, same replay report', (name) => {
    const file = fixture(`torch/${name}`);
    const fast = readReplaySnapshot(file);
    expect(parsedView(fast)).toEqual(parsedView(parseSnapshot(readSnapshotFile(file))));
    expect(replaySnapshot(fast)).toEqual(replaySnapshot(readSnapshotFile(file)));
  });

  it('several devices, one without a trace: the same traces per device from either reader', () => {
    const plain = readSnapshotFile(fixture('torch/replay_devices_oom.pickle')) as { device_traces: { action: string }[][] };
    // Without its OOM entry (reading those is the reader's own business) the file reads the same both ways.
    plain.device_traces[0] = plain.device_traces[0].filter((e) => e.action !== 'oom');
    const file = path.join(tmp, 'devices.pickle');
    writeFileSync(file, writePickle(plain));
    const fast = readReplaySnapshot(file);
    expect(fast.traces.map((t) => t.length)).toEqual([7, 0, 5]);
    expect(parsedView(fast)).toEqual(parsedView(parseSnapshot(plain)));
    expect(replaySnapshot(fast).untracedDevices).toEqual([1]);
  });

  it('replays a trace action it does not know as nothing, with a warning, in both paths', () => {
    const raw = { segments: [], device_traces: [[{ action: 'teleport', addr: 0, size: 1, stream: 0, time_us: 1 }]] };
    const file = path.join(tmp, 'bad-action.pickle');
    writeFileSync(file, writePickle(raw));
    const said = 'replay skips the 1 trace entry of action "teleport", unknown to memscope: if it changes memory, replay mismatches from the first of them';
    const columnar = readReplaySnapshot(file);
    expect(columnar.warnings).toContain(said);
    expect(columnar.traces[0]!.map((e) => e.action)).toEqual(['snapshot']);
    const plain = parseSnapshot(raw);
    expect(plain.warnings).toEqual([said]);
    expect(plain.traces[0]!.map((e) => e.action)).toEqual(['snapshot']);
  });

  it('reads JSON snapshots, and names a missing file', () => {
    const file = path.join(tmp, 'snap.json');
    writeFileSync(file, JSON.stringify({ segments: [], device_traces: [[]] }));
    expect(readReplaySnapshot(file).traces).toEqual([[]]);
    expect(() => readReplaySnapshot(path.join(tmp, 'missing.pickle'))).toThrow(/missing\.pickle: no such file$/);
  });
});
