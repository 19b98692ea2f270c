// A fake WebGPU with the shape of the real classes (prototype methods, the browser's normalised
// figures on each resource), for driving memscope/webgpu in Node. Validation follows the spec where
// the tests look: a missing `usage` is a TypeError thrown by the binding, mappedAtCreation with a
// size not a multiple of 4 a RangeError; a size over maxBufferSize gives an (invalid) buffer.
export class FakeBuffer {
  destroyed = false;
  constructor(readonly size: number, readonly usage: number, readonly label: string) {}
  destroy(): void {
    this.destroyed = true;
  }
}

export class FakeTexture {
  readonly width: number;
  readonly height: number;
  readonly depthOrArrayLayers: number;
  readonly mipLevelCount: number;
  readonly sampleCount: number;
  readonly dimension: string;
  readonly format: string;
  readonly usage: number;
  readonly label: string;
  constructor(d: { size: number[] | { width: number; height?: number; depthOrArrayLayers?: number }; format: string; usage: number; label?: string; mipLevelCount?: number; sampleCount?: number; dimension?: string }) {
    const [w, h, z] = Array.isArray(d.size) ? [d.size[0]!, d.size[1] ?? 1, d.size[2] ?? 1] : [d.size.width, d.size.height ?? 1, d.size.depthOrArrayLayers ?? 1];
    this.width = w;
    this.height = h;
    this.depthOrArrayLayers = z;
    this.mipLevelCount = d.mipLevelCount ?? 1;
    this.sampleCount = d.sampleCount ?? 1;
    this.dimension = d.dimension ?? '2d';
    this.format = d.format;
    this.usage = d.usage;
    this.label = d.label ?? '';
  }
  destroy(): void {}
}

export class FakeQuerySet {
  constructor(readonly type: string, readonly count: number, readonly label: string) {}
  destroy(): void {}
}

export class FakeDevice {
  readonly limits = { maxBufferSize: 1 << 28 };
  label = '';
  createBuffer(d: { size: number; usage?: number; label?: string; mappedAtCreation?: boolean }): FakeBuffer {
    if (typeof d.usage !== 'number') throw new TypeError("Failed to execute 'createBuffer' on 'GPUDevice': required member usage is undefined.");
    if (d.mappedAtCreation && d.size % 4 !== 0) throw new RangeError('buffer size must be a multiple of 4 when mappedAtCreation is true');
    return new FakeBuffer(d.size, d.usage, d.label ?? '');
  }
  createTexture(d: ConstructorParameters<typeof FakeTexture>[0]): FakeTexture {
    return new FakeTexture(d);
  }
  createQuerySet(d: { type: string; count: number; label?: string }): FakeQuerySet {
    return new FakeQuerySet(d.type, d.count, d.label ?? '');
  }
  destroy(): void {}
}

export class FakeAdapter {
  async requestDevice(): Promise<FakeDevice> {
    return new FakeDevice();
  }
}

export const fakeClasses = () => ({ GPUAdapter: FakeAdapter, GPUDevice: FakeDevice, GPUBuffer: FakeBuffer, GPUTexture: FakeTexture, GPUQuerySet: FakeQuerySet });
