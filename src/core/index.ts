export * from './errors.js';
export * from './units.js';
export * from './events.js';
export * from './device.js';
export * from './adapter.js';
export * from './settle.js';
export * from './site-rule.js';
