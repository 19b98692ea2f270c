// A training loop that keeps every step's prediction: the leak `memscope leaks` finds. The
// same file runs under `memscope run` in Node (browser-leaky-loop-node.mjs) and in a page under
// memscope/browser's capture (test/browser/browser-capture.test.ts); it takes the program's
// tfjs-core and tfjs-layers, so it imports nothing itself.
export async function train(tf, tfl, { clean = false, steps = 5 } = {}) {
  const model = tfl.sequential({ layers: [tfl.layers.dense({ units: 4, inputShape: [8], activation: 'relu' }), tfl.layers.dense({ units: 2 })] });
  model.compile({ optimizer: 'sgd', loss: 'meanSquaredError' });
  const xs = tf.ones([16, 8]);
  const ys = tf.ones([16, 2]);
  const kept = [];
  for (let i = 0; i < steps; i++) {
    await model.trainOnBatch(xs, ys);
    const prediction = model.predict(xs); // kept every step
    if (clean) prediction.dispose();
    else kept.push(prediction);
  }
  return kept.length;
}
