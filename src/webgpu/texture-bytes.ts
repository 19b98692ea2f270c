/**
 * How many bytes a WebGPU texture holds, from what its descriptor says: for each mip level, the
 * level's size in texel blocks (rounded up to whole blocks) × the format's bytes per block ×
 * its depth (3d textures, halving per level) or array layers (2d arrays, not halving), summed over
 * the levels, × sampleCount. This is the texel data WebGPU defines (the "texel block copy
 * footprint" of the WebGPU spec's format table); what a driver really reserves — row pitch and
 * alignment padding, tiling, compression metadata, the resolve copy of a multisampled texture —
 * is not visible to a page, so the figure is a floor.
 */
import type { ExtentLike, ResourceLike, TextureDescriptorLike } from './gpu-types.js';

interface BlockInfo {
  /** Bytes of one texel block. */
  bytes: number;
  width: number;
  height: number;
  /** The format's bytes are an estimate: WebGPU leaves the layout to the implementation. */
  estimated?: boolean;
}

const PLAIN: Record<number, string[]> = {
  1: ['r8unorm', 'r8snorm', 'r8uint', 'r8sint', 'stencil8'],
  2: ['r16uint', 'r16sint', 'r16float', 'r16unorm', 'r16snorm', 'rg8unorm', 'rg8snorm', 'rg8uint', 'rg8sint', 'depth16unorm'],
  4: [
    'r32uint', 'r32sint', 'r32float', 'rg16uint', 'rg16sint', 'rg16float', 'rg16unorm', 'rg16snorm',
    'rgba8unorm', 'rgba8unorm-srgb', 'rgba8snorm', 'rgba8uint', 'rgba8sint', 'bgra8unorm', 'bgra8unorm-srgb',
    'rgb9e5ufloat', 'rgb10a2uint', 'rgb10a2unorm', 'rg11b10ufloat', 'depth32float',
  ],
  8: ['rg32uint', 'rg32sint', 'rg32float', 'rgba16uint', 'rgba16sint', 'rgba16float', 'rgba16unorm', 'rgba16snorm'],
  16: ['rgba32uint', 'rgba32sint', 'rgba32float'],
};

/** 4×4-block compressed formats by bytes per block. */
const BLOCK_4X4: Record<number, string[]> = {
  8: [
    'bc1-rgba-unorm', 'bc1-rgba-unorm-srgb', 'bc4-r-unorm', 'bc4-r-snorm',
    'etc2-rgb8unorm', 'etc2-rgb8unorm-srgb', 'etc2-rgb8a1unorm', 'etc2-rgb8a1unorm-srgb', 'eac-r11unorm', 'eac-r11snorm',
  ],
  16: [
    'bc2-rgba-unorm', 'bc2-rgba-unorm-srgb', 'bc3-rgba-unorm', 'bc3-rgba-unorm-srgb', 'bc5-rg-unorm', 'bc5-rg-snorm',
    'bc6h-rgb-ufloat', 'bc6h-rgb-float', 'bc7-rgba-unorm', 'bc7-rgba-unorm-srgb',
    'etc2-rgba8unorm', 'etc2-rgba8unorm-srgb', 'eac-rg11unorm', 'eac-rg11snorm',
  ],
};

/**
 * Depth formats whose storage WebGPU leaves to the implementation: `depth24plus` is 24 bits or
 * more (counted as 4 bytes); the combined depth-stencil formats are counted as 8 bytes, the
 * layout (32-bit depth, 8-bit stencil, padding) D3D12 and Vulkan drivers commonly use.
 */
const ESTIMATED: Record<string, number> = {
  depth24plus: 4,
  'depth24plus-stencil8': 8,
  'depth32float-stencil8': 8,
};

const FORMATS = new Map<string, BlockInfo>();
for (const [bytes, names] of Object.entries(PLAIN)) for (const n of names) FORMATS.set(n, { bytes: Number(bytes), width: 1, height: 1 });
for (const [bytes, names] of Object.entries(BLOCK_4X4)) for (const n of names) FORMATS.set(n, { bytes: Number(bytes), width: 4, height: 4 });
for (const [name, bytes] of Object.entries(ESTIMATED)) FORMATS.set(name, { bytes, width: 1, height: 1, estimated: true });

const ASTC = /^astc-(\d+)x(\d+)-unorm(?:-srgb)?$/;

/** The block of a texture format, or undefined for a format memscope does not know. */
export function formatBlock(format: string): BlockInfo | undefined {
  const known = FORMATS.get(format);
  if (known) return known;
  const astc = ASTC.exec(format);
  if (astc) return { bytes: 16, width: Number(astc[1]), height: Number(astc[2]) };
  return undefined;
}

/** A texture's shape, normalised from the texture object (the browser's figures) or its descriptor. */
export interface TextureShape {
  width: number;
  height: number;
  depthOrArrayLayers: number;
  mipLevelCount: number;
  sampleCount: number;
  dimension: '1d' | '2d' | '3d';
  format: string;
}

function extent(size: ExtentLike): [number, number, number] {
  if (Array.isArray(size)) {
    const s = size as readonly number[];
    return [Number(s[0]), Number(s[1] ?? 1), Number(s[2] ?? 1)];
  }
  const d = size as { width: number; height?: number; depthOrArrayLayers?: number };
  return [Number(d.width), Number(d.height ?? 1), Number(d.depthOrArrayLayers ?? 1)];
}

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

export function textureShape(descriptor: TextureDescriptorLike, texture: ResourceLike): TextureShape {
  const [w, h, d] = extent(descriptor.size);
  const dim = texture.dimension ?? descriptor.dimension ?? '2d';
  return {
    width: num(texture.width) ?? w,
    height: num(texture.height) ?? h,
    depthOrArrayLayers: num(texture.depthOrArrayLayers) ?? d,
    mipLevelCount: num(texture.mipLevelCount) ?? descriptor.mipLevelCount ?? 1,
    sampleCount: num(texture.sampleCount) ?? descriptor.sampleCount ?? 1,
    dimension: dim === '1d' || dim === '3d' ? dim : '2d',
    format: typeof texture.format === 'string' ? texture.format : String(descriptor.format),
  };
}

/**
 * Bytes of a texture's texel data by the rule at the top of this file. A format memscope does
 * not know counts 4 bytes a texel and is reported through `unknownFormat`.
 */
export function textureBytes(shape: TextureShape): { bytes: number; unknownFormat: boolean; estimated: boolean } {
  const block = formatBlock(shape.format);
  const b = block ?? { bytes: 4, width: 1, height: 1 };
  let total = 0;
  for (let level = 0; level < shape.mipLevelCount; level++) {
    const w = Math.max(1, shape.width >> level);
    const h = shape.dimension === '1d' ? 1 : Math.max(1, shape.height >> level);
    const depth = shape.dimension === '3d' ? Math.max(1, shape.depthOrArrayLayers >> level) : shape.depthOrArrayLayers;
    total += Math.ceil(w / b.width) * Math.ceil(h / b.height) * b.bytes * depth;
  }
  return { bytes: total * shape.sampleCount, unknownFormat: block === undefined, estimated: block?.estimated === true };
}
