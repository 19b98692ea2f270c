import { afterEach, describe, expect, it } from 'vitest';
import { readSnapshot } from '../../src/torch/snapshot-decoder.js';
import { installWebGPU, installedWebGPU, textureBytes, type WebGPUMemory } from '../../src/webgpu/index.js';
import { FakeAdapter, FakeBuffer, FakeDevice, FakeQuerySet, FakeTexture, fakeClasses } from './fake-gpu.js';

const STORAGE = 0x80;
const COPY_DST = 0x08;
let memory: WebGPUMemory | undefined;
afterEach(() => {
  memory?.uninstall();
  memory = undefined;
});

async function setup(): Promise<{ memory: WebGPUMemory; device: FakeDevice }> {
  memory = installWebGPU({ classes: fakeClasses() });
  const device = await new FakeAdapter().requestDevice();
  return { memory, device };
}

describe('memscope/webgpu on a fake GPUDevice', () => {
  it('counts buffers from requestDevice devices as allocated and reserved, with peaks and counts', async () => {
    const { memory, device } = await setup();
    expect(memory.devices().map((d) => d.device)).toEqual(['webgpu:0']);
    const a = device.createBuffer({ size: 1000, usage: STORAGE, label: 'a' });
    const b = device.createBuffer({ size: 24, usage: COPY_DST });
    expect(memory.memoryAllocated()).toBe(1024);
    expect(memory.memoryReserved(device)).toBe(1024);
    a.destroy();
    expect(memory.memoryAllocated('webgpu:0')).toBe(24);
    expect(memory.maxMemoryAllocated(0)).toBe(1024);
    a.destroy(); // a second destroy is a no-op in WebGPU and here
    expect(memory.memoryAllocated()).toBe(24);
    memory.resetPeakMemoryStats();
    expect(memory.maxMemoryAllocated()).toBe(24);
    const s = memory.memoryStats();
    expect(s['allocated_bytes.all.allocated']).toBe(1024);
    expect(s['allocated_bytes.all.freed']).toBe(1000);
    expect(s['allocation.all.current']).toBe(1);
    expect(s['segment.all.current']).toBe(1);
    expect(s['num_device_alloc']).toBe(2);
    expect(s['num_device_free']).toBe(1);
    expect(s['num_alloc_retries']).toBe(0);
    expect(s['allocated_bytes.small_pool.current']).toBe(24);
    expect(s['allocated_bytes.large_pool.allocated']).toBe(0);
    expect(memory.resources().map((r) => [r.kind, r.bytes, r.usage, r.label])).toEqual([['buffer', 24, COPY_DST, '']]);
    expect(b).toBeInstanceOf(FakeBuffer);
    const summary = memory.memorySummary();
    const heading = summary.split('\n')[1]!;
    expect(heading).toMatch(/^\| +WebGPU memory summary, device ID 0 +\|$/);
    expect(heading.length).toBe(summary.split('\n')[0]!.length);
    // WebGPU has no CUDA OOM count or cudaMalloc retries: the counts line says what they are here.
    const counts = summary.split('\n')[3]!;
    expect(counts).toMatch(/^\| +WebGPU OOMs: 0 \| device allocation retries: 0 +\|$/);
    expect(counts.length).toBe(heading.length);
    expect(summary).not.toMatch(/CUDA|cudaMalloc/);
    expect(summary).toMatch(/\| Allocated memory\s+\|\s+24 B\s+\|\s+24 B\s+\|\s+1024 B\s+\|\s+1000 B\s+\|/);
    // Over 1 MiB (PyTorch's kSmallSize) a resource counts in the large pool.
    const big = device.createBuffer({ size: (1 << 20) + 4, usage: STORAGE });
    expect(memory.memoryStats()['reserved_bytes.large_pool.current']).toBe((1 << 20) + 4);
    expect(memory.memoryStats()['segment.small_pool.current']).toBe(1);
    big.destroy();
  });

  it('sizes textures by format block, mip levels, layers or depth, and samples; query sets at 8 bytes a query', async () => {
    const { memory, device } = await setup();
    const rgba = device.createTexture({ size: [256, 256], format: 'rgba8unorm', usage: 4, mipLevelCount: 9 });
    // 256² + 128² + … + 1², 4 bytes each
    let texels = 0;
    for (let s = 256; s >= 1; s >>= 1) texels += s * s;
    expect(memory.memoryAllocated()).toBe(texels * 4);
    rgba.destroy();
    device.createTexture({ size: { width: 10, height: 6, depthOrArrayLayers: 3 }, format: 'rgba16float', usage: 4, mipLevelCount: 2 });
    // array layers do not halve: (10×6 + 5×3) × 3 layers × 8 bytes
    expect(memory.memoryAllocated()).toBe((60 + 15) * 3 * 8);
    const t3d = device.createTexture({ size: [8, 8, 8], format: 'r8unorm', usage: 4, dimension: '3d', mipLevelCount: 4 });
    expect(memory.resourceRecord(t3d)!.bytes).toBe(512 + 64 + 8 + 1);
    const bc = device.createTexture({ size: [5, 5], format: 'bc1-rgba-unorm', usage: 4, mipLevelCount: 3 });
    // 5×5 → 2×2 blocks, 2×2 → 1, 1×1 → 1; 8 bytes a block
    expect(memory.resourceRecord(bc)!.bytes).toBe((4 + 1 + 1) * 8);
    const ms = device.createTexture({ size: [64, 32], format: 'bgra8unorm', usage: 16, sampleCount: 4 });
    expect(memory.resourceRecord(ms)!.bytes).toBe(64 * 32 * 4 * 4);
    expect(memory.resourceRecord(ms)!.shape).toBe('bgra8unorm 64×32×1 4× samples');
    const astc = device.createTexture({ size: [13, 13], format: 'astc-6x5-unorm', usage: 4 });
    expect(memory.resourceRecord(astc)!.bytes).toBe(3 * 3 * 16);
    const q = device.createQuerySet({ type: 'timestamp', count: 6 });
    expect(q).toBeInstanceOf(FakeQuerySet);
    expect(memory.resourceRecord(q)!.bytes).toBe(48);
    expect(textureBytes({ width: 4, height: 4, depthOrArrayLayers: 1, mipLevelCount: 1, sampleCount: 1, dimension: '2d', format: 'depth24plus-stencil8' })).toEqual({ bytes: 128, unknownFormat: false, estimated: true });
    const odd = device.createTexture({ size: [2, 2], format: 'r64-future-format', usage: 4 });
    expect(memory.resourceRecord(odd)!.bytes).toBe(16);
    expect(memory.warnings).toEqual(['texture format "r64-future-format" unknown to memscope: counted as 4 bytes a texel']);
    expect(memory.figures().byKind.texture.count).toBe(6);
    expect(memory.figures().byKind.querySet.reserved).toBe(48);
  });

  it('passes exceptions of the original through unchanged and records nothing for them', async () => {
    const unpatched = FakeDevice.prototype.createBuffer;
    const { memory, device } = await setup();
    const thrown = (call: () => unknown): Error => {
      try {
        call();
      } catch (e) {
        return e as Error;
      }
      throw new Error('expected a throw');
    };
    for (const descriptor of [{ size: 6, usage: 1, mappedAtCreation: true }, { size: 4 } as never]) {
      const mine = thrown(() => device.createBuffer(descriptor));
      const theirs = thrown(() => unpatched.call(new FakeDevice(), descriptor));
      expect([mine.constructor, mine.message]).toEqual([theirs.constructor, theirs.message]);
    }
    expect(memory.resources()).toEqual([]);
    expect(memory.warnings).toEqual([]);
  });

  it('does not count a buffer over maxBufferSize (WebGPU makes it invalid) and says so', async () => {
    const { memory, device } = await setup();
    const big = device.createBuffer({ size: 2 ** 29, usage: STORAGE, label: 'huge' });
    expect(big).toBeInstanceOf(FakeBuffer);
    expect(memory.memoryReserved()).toBe(0);
    expect(memory.warnings[0]).toMatch(/"huge" of 536870912 bytes is over the device's maxBufferSize/);
  });

  it('uninstall restores every patched method exactly, and a second install is refused', () => {
    const protos = { adapter: FakeAdapter.prototype.requestDevice, cb: FakeDevice.prototype.createBuffer, ct: FakeDevice.prototype.createTexture, cq: FakeDevice.prototype.createQuerySet, dd: FakeDevice.prototype.destroy, bd: FakeBuffer.prototype.destroy, td: FakeTexture.prototype.destroy, qd: FakeQuerySet.prototype.destroy };
    memory = installWebGPU({ classes: fakeClasses() });
    expect(FakeDevice.prototype.createBuffer).not.toBe(protos.cb);
    expect(FakeDevice.prototype.createBuffer.name).toBe('createBuffer');
    expect(() => installWebGPU({ classes: fakeClasses() })).toThrow(/already installed/);
    memory.uninstall();
    expect({ adapter: FakeAdapter.prototype.requestDevice, cb: FakeDevice.prototype.createBuffer, ct: FakeDevice.prototype.createTexture, cq: FakeDevice.prototype.createQuerySet, dd: FakeDevice.prototype.destroy, bd: FakeBuffer.prototype.destroy, td: FakeTexture.prototype.destroy, qd: FakeQuerySet.prototype.destroy }).toEqual(protos);
    expect(Object.getOwnPropertyDescriptor(FakeDevice.prototype, 'createBuffer')!.enumerable).toBe(false);
    expect(() => installWebGPU({ classes: {} })).toThrow(/no GPUDevice class/);
  });

  it('keeps a throwing listener away from the page and from other listeners', async () => {
    const { memory, device } = await setup();
    memory.subscribe(() => {
      throw new Error('panel broke');
    });
    const seen: string[] = [];
    memory.subscribe((e) => seen.push(`${e.type} ${e.allocated}`));
    const b = device.createBuffer({ size: 8, usage: 1 });
    b.destroy();
    expect(seen).toEqual(['create 8', 'destroy 0']);
    expect(memory.warnings).toEqual(['memscope failed while recording a subscribe() listener: panel broke']);
  });

  it('gives the page its object when reading the created resource fails inside memscope', async () => {
    class OddDevice extends FakeDevice {}
    const unreadable = { get size(): number { throw new Error('size unreadable'); }, destroy() {} };
    Object.defineProperty(OddDevice.prototype, 'createBuffer', {
      value: function createBuffer() {
        return unreadable;
      },
      configurable: true,
      writable: true,
    });
    memory = installWebGPU({ classes: { ...fakeClasses(), GPUDevice: OddDevice } });
    const device = new OddDevice();
    expect(memory.track(device)).toBe('webgpu:0');
    expect(memory.track(device)).toBe('webgpu:0');
    expect(device.createBuffer({ size: 4, usage: 1 })).toBe(unreadable);
    expect(memory.resources()).toEqual([]);
    expect(memory.warnings).toEqual(['memscope failed while recording createBuffer: size unreadable']);
    expect(() => memory!.memoryAllocated(new FakeDevice())).toThrow(/not tracked/);
    expect(installedWebGPU()).toBe(memory);
    memory.uninstall();
    expect(installedWebGPU()).toBeUndefined();
  });

  it('attributes resources, tells pooled (reserved) from in use (allocated), and destroys with the device', async () => {
    const { memory, device } = await setup();
    const w = memory.withAttribution({ category: 'Parameter', framework: 'onnxruntime-web', operator: 'session.create' }, () => device.createBuffer({ size: 400, usage: STORAGE }));
    memory.step(1);
    const end = memory.beginAttribution({ category: 'Activation', framework: 'tfjs-webgpu' });
    const act = memory.withAttribution({ operator: 'MatMul' }, () => device.createBuffer({ size: 100, usage: STORAGE }));
    end();
    const other = device.createBuffer({ size: 4, usage: STORAGE });
    memory.tag(other, { category: 'Other' });
    expect(memory.resourceRecord(w)!.attribution).toEqual({ category: 'Parameter', framework: 'onnxruntime-web', operator: 'session.create' });
    expect(memory.resourceRecord(act)!.attribution).toEqual({ category: 'Activation', framework: 'tfjs-webgpu', operator: 'MatMul', step: '1' });
    expect(memory.resourceRecord(other)!.attribution).toEqual({ category: 'Other', step: '1' });
    memory.markPooled(act);
    expect(memory.memoryAllocated()).toBe(404);
    expect(memory.memoryReserved()).toBe(504);
    const f = memory.figures();
    expect(f.byCategory).toEqual({ Parameter: { allocated: 400, reserved: 400, count: 1 }, Activation: { allocated: 0, reserved: 100, count: 1 }, Other: { allocated: 4, reserved: 4, count: 1 } });
    expect(f.byFramework['onnxruntime-web']!.reserved).toBe(400);
    memory.markInUse(act);
    expect(memory.memoryAllocated()).toBe(504);
    device.destroy();
    expect(memory.memoryReserved()).toBe(0);
    expect(memory.maxMemoryReserved()).toBe(504);
    expect(memory.resources()).toEqual([]);
    // What a destroyed device makes afterwards is an invalid resource, holding no memory.
    device.createBuffer({ size: 64, usage: STORAGE });
    expect([memory.memoryAllocated(), memory.memoryReserved(), memory.resources().length]).toEqual([0, 0, 0]);
  });

  it("a pool's buffer handed out again is traced with the stack that took it, as a creation is", async () => {
    const { memory, device } = await setup();
    memory.recordMemoryHistory({ maxEntries: 100 });
    const pooled = device.createBuffer({ size: 256, usage: STORAGE });
    memory.markPooled(pooled);
    function takeFromPool(): void {
      memory.markInUse(pooled);
    }
    takeFromPool();
    const entries = memory.snapshot().device_traces[0]!;
    expect(entries.map((e) => e.action)).toEqual(['segment_alloc', 'alloc', 'free_requested', 'free_completed', 'alloc']);
    expect((entries.at(-1)!.frames ?? []).map((f) => f.name)).toContain('takeFromPool');
  });

  it('frees every resource of a device when its lost promise resolves', async () => {
    memory = installWebGPU({ classes: fakeClasses() });
    let lose!: (info: unknown) => void;
    const device = Object.assign(new FakeDevice(), { lost: new Promise((resolve) => (lose = resolve)) });
    memory.track(device);
    device.createBuffer({ size: 64, usage: STORAGE });
    expect(memory.memoryReserved()).toBe(64);
    lose({ reason: 'unknown', message: 'GPU process reset' });
    await Promise.resolve();
    await Promise.resolve();
    expect(memory.memoryReserved()).toBe(0);
    expect(memory.memoryStats()['num_device_free']).toBe(1);
    device.createBuffer({ size: 64, usage: STORAGE });
    expect(memory.memoryReserved()).toBe(0);
  });

  it('snapshot() and dumpSnapshot() are PyTorch snapshots memscope reads back without warnings', async () => {
    const { memory, device } = await setup();
    memory.recordMemoryHistory({ maxEntries: 100 });
    const second = await new FakeAdapter().requestDevice();
    const keep = memory.withAttribution({ category: 'Parameter' }, () => device.createBuffer({ size: 4096, usage: STORAGE, label: 'weights' }));
    device.createBuffer({ size: 512, usage: STORAGE }).destroy();
    const pooled = device.createBuffer({ size: 1024, usage: STORAGE });
    memory.markPooled(pooled);
    second.createTexture({ size: [16, 16], format: 'rgba8unorm', usage: 4 });
    memory.marker('after setup');
    const dict = memory.snapshot();
    // CUDA's allocator settings mean nothing for WebGPU: the snapshot has none.
    expect('allocator_settings' in dict).toBe(false);
    expect(dict.segments.map((s) => [s.device, s.total_size, s.allocated_size])).toEqual([[0, 4096, 4096], [0, 1024, 0], [1, 1024, 1024]]);
    expect(dict.device_traces[0]!.map((e) => e.action)).toEqual(['segment_alloc', 'alloc', 'segment_alloc', 'alloc', 'free_requested', 'free_completed', 'segment_free', 'segment_alloc', 'alloc', 'free_requested', 'free_completed']);
    expect(dict.device_traces[1]!.map((e) => e.action)).toEqual(['segment_alloc', 'alloc']);
    const frames = dict.segments[0]!.blocks[0]!.frames;
    expect(frames[0]).toEqual({ name: 'buffer "weights"', filename: '<webgpu>', line: 0 });
    expect(frames.at(-1)).toEqual({ name: 'Parameter', filename: '<webgpu>', line: 0 });
    expect(frames.some((f) => /memory\.test\.ts$/.test(f.filename))).toBe(true);
    expect(frames.some((f) => /src[\\/]webgpu[\\/]/.test(f.filename))).toBe(false);
    // With the trace on, a free carries the stack that destroyed the resource.
    const free = dict.device_traces[0]!.find((e) => e.action === 'free_requested')!;
    expect(free.frames!.some((f) => /memory\.test\.ts$/.test(f.filename))).toBe(true);
    expect(dict.device_type).toBe('webgpu');
    const read = readSnapshot(memory.dumpSnapshot());
    expect(read.warnings).toEqual([]);
    expect(read.deviceType).toBe('webgpu');
    expect(read.segments.map((s) => [s.device, s.totalSize, s.allocatedSize])).toEqual([[0, 4096, 4096], [0, 1024, 0], [1, 1024, 1024]]);
    expect(read.traces.map((t) => [t.device, t.count])).toEqual([[0, 11], [1, 2]]);
    expect(read.externalAnnotations.map((a) => [a.stage, a.name])).toEqual([['MARK', 'after setup']]);
    expect(keep).toBeInstanceOf(FakeBuffer);
  });

  it('keeps at most maxEntries trace entries, the newest, and refuses bad history options', async () => {
    const { memory, device } = await setup();
    memory.recordMemoryHistory({ maxEntries: 3, stacks: 'none' });
    for (const size of [4, 8, 12]) device.createBuffer({ size, usage: 1 });
    const trace = memory.snapshot().device_traces[0]!;
    expect(trace.map((e) => [e.action, e.size])).toEqual([['alloc', 8], ['segment_alloc', 12], ['alloc', 12]]);
    expect(trace.every((e) => e.frames!.length === 0)).toBe(true);
    expect(() => memory.recordMemoryHistory({ enabled: 'yes' as never })).toThrow(/enabled must be/);
    expect(() => memory.recordMemoryHistory({ maxEntries: -1 })).toThrow(/maxEntries/);
    memory.recordMemoryHistory({ enabled: null });
    expect(memory.snapshot().device_traces[0]).toEqual([]);
    expect(() => memory.memoryAllocated('cuda:0')).toThrow(/unknown device/);
    expect(() => memory.memoryAllocated(3)).toThrow(/does not exist/);
  });
});
