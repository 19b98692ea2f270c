/**
 * The built-in example model and training loop used by memscope's CLI demos
 * (`memscope ops`, and any other command that needs a small real workload):
 * Dense → BatchNormalization → Dense, trained with Adam on generated data.
 * Everything is seeded, so two runs allocate exactly the same tensors.
 * Browser-safe; picking a backend in Node lives in demo-backend-node.ts.
 */
import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';

export interface DemoShape {
  readonly inputs: number;
  readonly hidden: number;
  readonly outputs: number;
  readonly batchSize: number;
}

export const DEMO_SHAPE: DemoShape = { inputs: 32, hidden: 64, outputs: 8, batchSize: 16 };

/** dense_in (Dense, relu) → bn (BatchNormalization) → dense_out (Dense), named so traces read clearly. */
export function buildDemoModel(shape: DemoShape = DEMO_SHAPE, name = 'demo'): tfl.Sequential {
  const model = tfl.sequential({ name });
  model.add(
    tfl.layers.dense({
      name: 'dense_in',
      inputShape: [shape.inputs],
      units: shape.hidden,
      activation: 'relu',
      kernelInitializer: tfl.initializers.glorotUniform({ seed: 1 }),
    }),
  );
  model.add(tfl.layers.batchNormalization({ name: 'bn' }));
  model.add(
    tfl.layers.dense({ name: 'dense_out', units: shape.outputs, kernelInitializer: tfl.initializers.glorotUniform({ seed: 2 }) }),
  );
  return model;
}

/** A fixed regression batch: inputs uniform in [-1, 1), targets a fixed linear map of them. */
export function demoBatch(shape: DemoShape = DEMO_SHAPE): { xs: tf.Tensor2D; ys: tf.Tensor2D } {
  return tf.tidy(() => {
    const xs = tf.randomUniform([shape.batchSize, shape.inputs], -1, 1, 'float32', 7) as tf.Tensor2D;
    const w = tf.randomUniform([shape.inputs, shape.outputs], -1, 1, 'float32', 8);
    return { xs, ys: tf.matMul(xs, w) as tf.Tensor2D };
  });
}

/**
 * One training step: forward in training mode (BatchNorm uses batch
 * statistics), mean squared error, backward, Adam update. Returns the loss.
 */
export function demoTrainStep(model: tfl.LayersModel, optimizer: tf.Optimizer, xs: tf.Tensor, ys: tf.Tensor): number {
  const loss = optimizer.minimize(() => {
    const predictions = model.apply(xs, { training: true }) as tf.Tensor;
    return tf.losses.meanSquaredError(ys, predictions) as tf.Scalar;
  }, true);
  const value = loss!.dataSync()[0]!;
  loss!.dispose();
  return value;
}

export interface DemoRun {
  readonly model: tfl.Sequential;
  readonly optimizer: tf.Optimizer;
  readonly xs: tf.Tensor2D;
  readonly ys: tf.Tensor2D;
  /** Runs `steps` training steps; returns the losses. */
  train(steps: number): number[];
  /** Frees the model's weights, the optimizer's state and the data. */
  dispose(): void;
}

/** Builds the model, an Adam optimizer and the data; training starts when `train` is called. */
export function createDemoRun(shape: DemoShape = DEMO_SHAPE): DemoRun {
  const model = buildDemoModel(shape);
  const optimizer = tf.train.adam(0.01);
  const { xs, ys } = demoBatch(shape);
  return {
    model,
    optimizer,
    xs,
    ys,
    train(steps) {
      const losses: number[] = [];
      for (let i = 0; i < steps; i++) losses.push(demoTrainStep(model, optimizer, xs, ys));
      return losses;
    },
    dispose() {
      model.dispose();
      optimizer.dispose();
      xs.dispose();
      ys.dispose();
    },
  };
}
