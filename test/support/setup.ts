/**
 * Runs before every test file (vitest.config.ts `setupFiles`). TFJS's cpu backend prints a
 * "Hi, looks like you are running TensorFlow.js in Node.js" banner through tfjs-core's `warn` on
 * its first write in every process; `warn` stays silent in production mode. PROD changes nothing
 * else tfjs-core, -layers or the backends do (IS_TEST, the other switch, also turns on the
 * engine's per-kernel leak checks), and `memscope demo` sets the same flag for the same banner.
 */
import * as tf from '@tensorflow/tfjs-core';

tf.env().set('PROD', true);
