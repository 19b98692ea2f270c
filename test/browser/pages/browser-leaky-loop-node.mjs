// browser-leaky-loop.mjs as a Node program, for `memscope run` (CPU backend, as in the page).
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import * as tfl from '@tensorflow/tfjs-layers';
import { train } from './browser-leaky-loop.mjs';

await tf.setBackend('cpu');
console.log(`kept ${await train(tf, tfl, { clean: process.argv.includes('--clean') })}`);
