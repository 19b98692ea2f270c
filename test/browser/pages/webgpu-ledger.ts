// A seeded random WebGPU program for memscope/webgpu's browser test: it creates and destroys
// buffers, textures and query sets of many sizes, formats, mip levels and sample counts, and keeps
// its own ledger of the bytes it holds (texel bytes by the WebGPU spec's format table, written here
// independently of src/webgpu/texture-bytes.ts), comparing memscope's figures with it at every step.
import { prng } from '../../support/prng.js';
import type { WebGPUMemory } from '../../../src/webgpu/index.js';

// The page's GPUDevice (memscope declares no WebGPU types; TypeScript's DOM library has none).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type GPUDevice = any;

const U = { MAP_READ: 1, MAP_WRITE: 2, COPY_SRC: 4, COPY_DST: 8, INDEX: 16, VERTEX: 32, UNIFORM: 64, STORAGE: 128, INDIRECT: 256, QUERY_RESOLVE: 512 };
const T = { COPY_SRC: 1, COPY_DST: 2, TEXTURE_BINDING: 4, STORAGE_BINDING: 8, RENDER_ATTACHMENT: 16 };

const BUFFER_USAGES = [
  U.STORAGE | U.COPY_DST | U.COPY_SRC,
  U.UNIFORM | U.COPY_DST,
  U.MAP_READ | U.COPY_DST,
  U.MAP_WRITE | U.COPY_SRC,
  U.VERTEX | U.INDEX,
  U.INDIRECT | U.STORAGE,
  U.QUERY_RESOLVE | U.COPY_SRC,
];

/** [format, bytes per texel block, block side, can be 3d, can be multisampled] */
const FORMATS: [string, number, number, boolean, boolean][] = [
  ['r8unorm', 1, 1, true, true],
  ['rg8unorm', 2, 1, true, true],
  ['r16float', 2, 1, true, true],
  ['rgba8unorm', 4, 1, true, true],
  ['bgra8unorm', 4, 1, true, true],
  ['r32float', 4, 1, true, false],
  ['rgba8uint', 4, 1, true, true],
  ['rg32float', 8, 1, true, false],
  ['rgba16float', 8, 1, true, true],
  ['rgba32float', 16, 1, true, false],
  ['depth16unorm', 2, 1, false, true],
  ['depth32float', 4, 1, false, true],
  ['stencil8', 1, 1, false, true],
];
const BC_FORMATS: [string, number, number, boolean, boolean][] = [
  ['bc1-rgba-unorm', 8, 4, false, false],
  ['bc3-rgba-unorm', 16, 4, false, false],
  ['bc7-rgba-unorm-srgb', 16, 4, false, false],
];

interface Entry {
  obj: { destroy(): void };
  bytes: number;
}

export interface LedgerResult {
  steps: number;
  mismatches: string[];
  peakAllocated: number;
  ledgerPeak: number;
  peakReserved: number;
  created: Record<string, number>;
  destroyed: number;
  formats: string[];
  sampleCounts: number[];
  maxMips: number;
  dimensions: string[];
  validationError: string | null;
  warnings: string[];
}

export async function runLedgerProgram(memory: WebGPUMemory, device: GPUDevice, seed: number, steps: number): Promise<LedgerResult> {
  const r = prng(seed);
  const formats = device.features.has('texture-compression-bc') ? [...FORMATS, ...BC_FORMATS] : FORMATS;
  const live: Entry[] = [];
  let held = 0;
  let peak = 0;
  const mismatches: string[] = [];
  const created: Record<string, number> = { buffer: 0, texture: 0, querySet: 0 };
  let destroyed = 0;
  const used = { formats: new Set<string>(), samples: new Set<number>(), dims: new Set<string>(), maxMips: 1 };
  device.pushErrorScope('validation');
  for (let step = 0; step < steps; step++) {
    const op = live.length === 0 ? 0 : r.int(10);
    if (op < 4) {
      const size = r.pick([0, 4, 16, 256, 4 * (1 + r.int(5000)), 65536, (1 << 20) + 4 * r.int(1000), 4 << 20]);
      const usage = r.pick(BUFFER_USAGES);
      const mapped = (usage & U.MAP_READ) === 0 && r.int(4) === 0;
      const b = device.createBuffer({ size, usage, mappedAtCreation: mapped, label: `b${step}` });
      if (mapped) b.unmap();
      live.push({ obj: b, bytes: size });
      held += size;
      created.buffer!++;
    } else if (op < 7) {
      const [format, bpb, block, can3d, canMs] = r.pick(formats);
      const ms = canMs && r.int(4) === 0;
      const dimension = !ms && can3d && r.int(4) === 0 ? '3d' : '2d';
      const w = block * (1 + r.int(dimension === '3d' ? 24 : 160)) + (block === 1 ? 0 : r.int(block));
      const h = block * (1 + r.int(dimension === '3d' ? 24 : 160)) + (block === 1 ? 0 : r.int(block));
      const d = ms ? 1 : dimension === '3d' ? 1 + r.int(16) : 1 + r.int(3);
      // Compressed formats need every mip level's size a multiple of the block at level 0 only.
      const bcW = block === 1 ? w : Math.ceil(w / block) * block;
      const bcH = block === 1 ? h : Math.ceil(h / block) * block;
      const largest = Math.max(bcW, bcH, dimension === '3d' ? d : 1);
      const maxMips = Math.floor(Math.log2(largest)) + 1;
      const mips = ms ? 1 : 1 + r.int(maxMips);
      const samples = ms ? 4 : 1;
      const usage = ms || format.startsWith('depth') || format === 'stencil8' ? T.RENDER_ATTACHMENT : T.TEXTURE_BINDING | T.COPY_DST;
      const t = device.createTexture({ size: [bcW, bcH, d], format, usage, mipLevelCount: mips, sampleCount: samples, dimension });
      let bytes = 0;
      for (let level = 0; level < mips; level++) {
        const lw = Math.max(1, bcW >> level);
        const lh = Math.max(1, bcH >> level);
        const ld = dimension === '3d' ? Math.max(1, d >> level) : d;
        bytes += Math.ceil(lw / block) * Math.ceil(lh / block) * bpb * ld;
      }
      bytes *= samples;
      live.push({ obj: t, bytes });
      held += bytes;
      created.texture!++;
      used.formats.add(format);
      used.samples.add(samples);
      used.dims.add(dimension);
      used.maxMips = Math.max(used.maxMips, mips);
    } else if (op === 7) {
      const count = 1 + r.int(64);
      const q = device.createQuerySet({ type: 'occlusion', count });
      live.push({ obj: q, bytes: count * 8 });
      held += count * 8;
      created.querySet!++;
    } else {
      const [e] = live.splice(r.int(live.length), 1);
      e!.obj.destroy();
      held -= e!.bytes;
      destroyed++;
    }
    peak = Math.max(peak, held);
    const got = [memory.memoryAllocated(device), memory.memoryReserved(device)];
    if (got[0] !== held || got[1] !== held) mismatches.push(`step ${step} (op ${op}): memscope ${got.join('/')} vs ledger ${held}`);
  }
  const error = await device.popErrorScope();
  const result: LedgerResult = {
    steps,
    mismatches,
    peakAllocated: memory.maxMemoryAllocated(device),
    ledgerPeak: peak,
    peakReserved: memory.maxMemoryReserved(device),
    created,
    destroyed,
    formats: [...used.formats].sort(),
    sampleCounts: [...used.samples].sort(),
    maxMips: used.maxMips,
    dimensions: [...used.dims].sort(),
    validationError: error ? error.message : null,
    warnings: [...memory.warnings],
  };
  for (const e of live) e.obj.destroy();
  return result;
}
