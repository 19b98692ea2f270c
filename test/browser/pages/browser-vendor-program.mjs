// A program that starts the capture itself, as an app does, while memscope and TFJS come from a
// chunk of their own (a bundler's vendor chunk, not under node_modules/): the capture folds that
// chunk as library code, so leaks are located in the program's file.
import { train } from './browser-leaky-loop.mjs';

export async function captureTraining(tf, tfl, memscope) {
  const capture = memscope.startCapture({ tf: [tf, tfl], stacks: true });
  await train(tf, tfl);
  return capture.stop();
}
