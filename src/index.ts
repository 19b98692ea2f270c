// memscope's framework-free API. Framework adapters live in subpath exports
// (memscope/tfjs, memscope/torch) so this entry never imports a framework.
export * from './core/index.js';
