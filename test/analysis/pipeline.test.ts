/**
 * The MemoryProfile pipeline on hand-built event streams: exact sequences,
 * independent of TFJS, including ones the cpu backend never produces
 * (storages no tensor was seen on). The TFJS ports are in memory-profiler.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { MemoryProfile } from '../../src/analysis/memory-profile.js';
import { formatDataFlow } from '../../src/analysis/format.js';
import { MemoryProfileTimeline } from '../../src/analysis/timeline.js';
import { FakeStream } from './fake-stream.js';

function timelineRows(profile: MemoryProfile) {
  return profile.timeline.map(([t, action, [key, version], bytes]) => {
    const who = key.kind === 'tensor' ? `T${key.id}/s${key.allocationId}` : `unknown s${key.allocationId}`;
    return `${t === -1 ? '   -1' : String(t / 1000).padStart(5)} ${action.padEnd(17)} ${who}(v${version}) ${bytes}`;
  });
}

describe('pipeline on hand-built events', () => {
  it('simple: a kernel output and a view of it', () => {
    const s = new FakeStream();
    const x = s.preexisting([25]);
    const y = s.preexisting([25]);
    const [z] = s.kernel('Mul', [x, y], [[25]]);
    s.view('Reshape', z!);
    const profile = new MemoryProfile(s.recorder.finish());
    expect(
      formatDataFlow(profile, [
        ['x', profile.keyOfTensor(x.id)],
        ['y', profile.keyOfTensor(y.id)],
        ['z', profile.keyOfTensor(z!.id)],
      ]),
    ).toMatchInlineSnapshot(`
      "x:       T0
      y:       T1
      z:       T2

      Mul                       T0(v0), T1(v0)   ->  T2(v0)
      Reshape                   T2(v0)           ->"
    `);
  });

  it('temporaries: storages allocated and freed inside one kernel', () => {
    const s = new FakeStream();
    const x = s.create([4]);
    const [y] = s.kernel('Max', [x], [[1]], [[4]]);
    s.dispose(x);
    s.dispose(y!);
    const profile = new MemoryProfile(s.recorder.finish());
    expect(formatDataFlow(profile)).toMatchInlineSnapshot(`
      "[memory]                                   ->  T0(v0)
      Max                       T0(v0)           ->  T2(v0)
      [memory]                  T0(v0*)          ->
      [memory]                  T2(v0*)          ->"
    `);
    const max = profile.dataFlowGraph.flowNodes.find((n) => n.event.name === 'Max')!;
    expect(max.intermediates.map((k) => profile.categories.get(k, 0))).toEqual(['TEMPORARY']);
    expect(timelineRows(profile)).toMatchInlineSnapshot(`
      [
        "    2 CREATE            T0/s1(v0) 16",
        "    4 CREATE            T1/s2(v0) 16",
        "    5 DESTROY           T1/s2(v0) 16",
        "    6 CREATE            T2/s3(v0) 4",
        "    8 DESTROY           T0/s1(v0) 16",
        "    9 DESTROY           T2/s3(v0) 4",
      ]
    `);
  });

  it('assign: the storage now holding the variable gets a new version; the old one is destroyed', () => {
    const s = new FakeStream();
    const w = s.makeTensor(s.makeStorage([2]), 'w');
    const g = s.preexisting([2]);
    s.recorder.onTensorCreate(w); // seen before the update
    const [updated] = s.kernel('Add', [w, g], [[2]]);
    s.assign(w, updated!);
    s.dispose(updated!, false); // tidy disposes the handle; the variable keeps the storage
    const profile = new MemoryProfile(s.recorder.finish());
    expect(formatDataFlow(profile)).toMatchInlineSnapshot(`
      "Add                       T0(v0), T1(v0)   ->  T0#1(v0)
      Variable.assign           T0(v0*), T0#1(v0)  ->  T0#1(v1)"
    `);
    expect(timelineRows(profile)).toMatchInlineSnapshot(`
      [
        "   -1 PREEXISTING       T0/s1(v0) 8",
        "   -1 PREEXISTING       T1/s2(v0) 8",
        "    3 CREATE            T0/s3(v0) 8",
        "    5 INCREMENT_VERSION T0/s3(v0) 8",
        "    5 DESTROY           T0/s1(v0) 8",
      ]
    `);
  });

  it('storages no tensor was seen on are timeline entries with an explicit unknown key (pytorch#142371)', () => {
    const s = new FakeStream();
    const before = s.makeStorage([1024]);
    s.recorder.onStorageFree(before); // existed before profiling, never seen as a tensor
    const y = s.makeStorage([64]);
    s.recorder.onStorageAlloc(y);
    s.recorder.onStorageFree(y);
    const z = s.create([256]);
    s.view('Reshape', z);
    s.dispose(z);
    const profile = new MemoryProfile(s.recorder.finish());
    expect(timelineRows(profile)).toMatchInlineSnapshot(`
      [
        "   -1 PREEXISTING       unknown s1(v0) 4096",
        "    2 DESTROY           unknown s1(v0) 4096",
        "    3 CREATE            unknown s2(v0) 256",
        "    4 DESTROY           unknown s2(v0) 256",
        "    5 CREATE            T0/s3(v0) 1024",
        "    8 DESTROY           T0/s3(v0) 1024",
      ]
    `);
    const timeline = new MemoryProfileTimeline(profile);
    // Unknown storages stack under "Unknown" (the last column), tensors under their category.
    const { times, sizes } = timeline.coalesce('cpu');
    expect(times.map((t, i) => `${t}: ${sizes[i]!.join(' ')}`)).toMatchInlineSnapshot(`
      [
        "2: 0 0 0 0 0 0 0 0 4096",
        "2: 0 0 0 0 0 0 0 0 0",
        "3: 0 0 0 0 0 0 0 0 256",
        "4: 0 0 0 0 0 0 0 0 0",
        "5: 0 0 0 0 0 0 0 0 1024",
        "8: 0 0 0 0 0 0 0 0 0",
      ]
    `);
  });
});

describe('bad and unbalanced event streams', () => {
  it('an unbalanced stream never throws from the sink; finish() closes what is open', () => {
    const s = new FakeStream();
    const x = s.create([2]);
    s.recorder.onKernelEnd({ name: 'NeverStarted', inputs: [], outputs: [], composite: false });
    s.recorder.onScopeEnd('never-opened', 'tidy');
    s.recorder.onScopeStart('left-open', 'annotation');
    s.recorder.onKernelStart({ name: 'Neg', inputs: [x], outputs: [], composite: false });
    // The scope ends while its kernel is still open: the kernel is closed with it.
    s.recorder.onScopeEnd('left-open', 'annotation');
    s.recorder.onScopeStart('still-open', 'tidy');
    const recording = s.recorder.finish();
    expect(recording.roots.map((e) => e.name)).toEqual(['[memory]', 'left-open', 'still-open']);
    for (const e of recording.roots) expect(e.endSeq).toBeGreaterThanOrEqual(e.startSeq);
    // Events after finish() are ignored.
    s.recorder.onStorageAlloc(s.makeStorage([1]));
    expect(s.recorder.finish().roots).toHaveLength(3);
    expect(() => new MemoryProfile(recording)).not.toThrow();
  });

  it('inconsistent streams are MemscopeErrors naming the storage, not crashes', () => {
    const doubleFree = new FakeStream();
    const t = doubleFree.create([4]);
    doubleFree.recorder.onKernelStart({ name: 'Weird', inputs: [t], outputs: [], composite: false });
    doubleFree.recorder.onStorageFree(t.storage);
    doubleFree.recorder.onStorageFree(t.storage);
    doubleFree.recorder.onKernelEnd({ name: 'Weird', inputs: [t], outputs: [], composite: false });
    expect(() => new MemoryProfile(doubleFree.recorder.finish())).toThrow(expect.objectContaining({ code: 'memory-profile-invalid', message: expect.stringMatching(/double free of id=0: storage 100/) }));

    const twice = new FakeStream();
    const y = twice.create([4]);
    twice.recorder.onStorageAlloc(y.storage); // the same storage "allocated" again
    expect(() => new MemoryProfile(twice.recorder.finish())).toThrow(expect.objectContaining({ code: 'memory-profile-invalid', message: expect.stringMatching(/created twice/) }));

    const resized = new FakeStream();
    const z = resized.create([4]);
    resized.recorder.onTensorDispose(z);
    resized.recorder.onStorageFree({ ...z.storage, bytes: 8 });
    expect(() => new MemoryProfile(resized.recorder.finish())).toThrow(expect.objectContaining({ code: 'memory-profile-invalid', message: expect.stringMatching(/storage 100: allocated with 16 B but freed with 8 B/) }));
  });
});
