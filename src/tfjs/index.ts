// memscope/tfjs: the TensorFlow.js adapter and TFJS-specific helpers.
export { tfjsAdapter } from './adapter.js';
export { annotate } from './annotate.js';
export { listTfjsDevices, readDeviceMemory, type TfjsDeviceListing } from './device-memory.js';
export { MemTracker } from './mem-tracker.js';
export { MemoryTracker } from './memory-tracker.js';
export { profile, ProfileResult, type ProfileOptions } from './profile.js';
export { step } from '../capture/step.js';
