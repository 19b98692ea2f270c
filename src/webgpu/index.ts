// memscope/webgpu: device-level WebGPU memory recording for any page, and torch.cuda.memory's
// API per WebGPU device. Browser code: no framework import, no Node module.
import { WebGPUMemory } from './memory.js';
import type { InstallOptions } from './recorder.js';

/**
 * Patches the page's WebGPU classes so that every device from `GPUAdapter.requestDevice` is
 * recorded from now on (`track(device)` adds one created earlier). `uninstall()` puts every
 * patched method back. One installation at a time.
 */
export function installWebGPU(options: InstallOptions = {}): WebGPUMemory {
  const memory = new WebGPUMemory(options);
  current = memory;
  return memory;
}

let current: WebGPUMemory | undefined;

/**
 * The installation from `installWebGPU` still installed, if any: how a framework adapter loaded
 * separately finds the recorder to attribute to.
 */
export function installedWebGPU(): WebGPUMemory | undefined {
  if (current && !current.installed) current = undefined;
  return current;
}

export { WebGPUMemory, UNATTRIBUTED, type GroupFigures, type RecordMemoryHistoryOptions, type WebGPUDeviceArg, type WebGPUDeviceListing, type WebGPUFigures } from './memory.js';
export { WebGPURecorder, type Annotation, type InstallOptions, type WebGPUMemoryEvent, type WebGPUMemoryListener } from './recorder.js';
export { WEBGPU_FRAME_FILE, type Attribution, type FreeReason, type ResourceKind, type ResourceRecord } from './device-record.js';
export { formatBlock, textureBytes, textureShape, type TextureShape } from './texture-bytes.js';
export { pageClasses, type BufferDescriptorLike, type ClassLike, type DeviceLike, type ExtentLike, type QuerySetDescriptorLike, type ResourceLike, type TextureDescriptorLike, type WebGPUClasses } from './gpu-types.js';
