/**
 * The parts of the WebGPU API memscope touches, typed structurally so that memscope's own
 * declarations need no `@webgpu/types` and a test can drive the recorder with fake classes.
 * A real `GPUDevice`, `GPUBuffer` or `GPUTexture` satisfies these shapes.
 */

/** `GPUExtent3D`: a sequence [width, height?, depthOrArrayLayers?] or a dict. */
export type ExtentLike = readonly number[] | { width: number; height?: number; depthOrArrayLayers?: number };

export interface BufferDescriptorLike {
  size: number;
  usage: number;
  label?: string;
  mappedAtCreation?: boolean;
}

export interface TextureDescriptorLike {
  size: ExtentLike;
  format: string;
  usage: number;
  label?: string;
  mipLevelCount?: number;
  sampleCount?: number;
  dimension?: '1d' | '2d' | '3d';
}

export interface QuerySetDescriptorLike {
  type: string;
  count: number;
  label?: string;
}

/** What memscope reads from a created resource; the browser's own normalised figures when present. */
export interface ResourceLike {
  label?: string;
  size?: number;
  usage?: number;
  width?: number;
  height?: number;
  depthOrArrayLayers?: number;
  mipLevelCount?: number;
  sampleCount?: number;
  dimension?: string;
  format?: string;
  count?: number;
  type?: string;
  destroy?(): void;
}

export interface DeviceLike {
  label?: string;
  limits?: { maxBufferSize?: number };
  createBuffer(descriptor: BufferDescriptorLike): object;
  createTexture(descriptor: TextureDescriptorLike): object;
  createQuerySet?(descriptor: QuerySetDescriptorLike): object;
  destroy?(): void;
}

/** A constructor whose prototype memscope patches (`GPUAdapter`, `GPUDevice`, `GPUBuffer`…). */
export interface ClassLike {
  prototype: object;
}

/**
 * The WebGPU classes whose prototypes `installWebGPU` patches. In a page they are the globals
 * of the same names; a test passes its own.
 */
export interface WebGPUClasses {
  GPUAdapter?: ClassLike;
  GPUDevice?: ClassLike;
  GPUBuffer?: ClassLike;
  GPUTexture?: ClassLike;
  GPUQuerySet?: ClassLike;
}

/** The page's WebGPU classes (those that exist). */
export function pageClasses(): WebGPUClasses {
  const g = globalThis as Record<string, unknown>;
  const pick = (name: string): ClassLike | undefined => {
    const c = g[name];
    return typeof c === 'function' && typeof (c as ClassLike).prototype === 'object' ? (c as ClassLike) : undefined;
  };
  return {
    GPUAdapter: pick('GPUAdapter'),
    GPUDevice: pick('GPUDevice'),
    GPUBuffer: pick('GPUBuffer'),
    GPUTexture: pick('GPUTexture'),
    GPUQuerySet: pick('GPUQuerySet'),
  };
}
