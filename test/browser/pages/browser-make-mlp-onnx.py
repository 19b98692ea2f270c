#!/usr/bin/env python3
"""Writes test/fixtures/onnx/mlp.onnx: a two-layer perceptron in ONNX (opset 13), encoded by hand (no onnx package).

    y[1,128] = MatMul(Relu(Add(MatMul(x[1,256], W1[256,512]), b1[512])), W2[512,128])

The weights are deterministic (a small linear congruential sequence), stored as raw float32
initializers: W1 524288 B + b1 2048 B + W2 262144 B = 788480 B. Used by
test/browser/browser-onnxruntime.test.ts. Run: python3 test/browser/pages/browser-make-mlp-onnx.py
"""
import os
import struct


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, wire, payload):
    return varint((num << 3) | wire) + payload


def f_int(num, value):
    return field(num, 0, varint(value))


def f_bytes(num, data):
    if isinstance(data, str):
        data = data.encode()
    return field(num, 2, varint(len(data)) + data)


FLOAT = 1


def tensor(name, dims, values):
    raw = struct.pack('<%df' % len(values), *values)
    return b''.join(f_int(1, d) for d in dims) + f_int(2, FLOAT) + f_bytes(8, name) + f_bytes(9, raw)


def value_info(name, dims):
    shape = b''.join(f_bytes(1, f_int(1, d)) for d in dims)
    tensor_type = f_int(1, FLOAT) + f_bytes(2, shape)
    return f_bytes(1, name) + f_bytes(2, f_bytes(1, tensor_type))


def node(op, inputs, outputs, name):
    return b''.join(f_bytes(1, i) for i in inputs) + b''.join(f_bytes(2, o) for o in outputs) + f_bytes(3, name) + f_bytes(4, op)


def weights(count, seed):
    state = seed
    out = []
    for _ in range(count):
        state = (state * 1103515245 + 12345) % (1 << 31)
        out.append((state / (1 << 31) - 0.5) * 0.1)
    return out


def main():
    graph = b''.join([
        f_bytes(1, node('MatMul', ['x', 'W1'], ['h0'], 'fc1')),
        f_bytes(1, node('Add', ['h0', 'b1'], ['h1'], 'bias1')),
        f_bytes(1, node('Relu', ['h1'], ['h2'], 'relu')),
        f_bytes(1, node('MatMul', ['h2', 'W2'], ['y'], 'fc2')),
        f_bytes(2, 'mlp'),
        f_bytes(5, tensor('W1', [256, 512], weights(256 * 512, 1))),
        f_bytes(5, tensor('b1', [512], weights(512, 2))),
        f_bytes(5, tensor('W2', [512, 128], weights(512 * 128, 3))),
        f_bytes(11, value_info('x', [1, 256])),
        f_bytes(12, value_info('y', [1, 128])),
    ])
    model = f_int(1, 8) + f_bytes(2, 'memscope-test') + f_bytes(7, graph) + f_bytes(8, f_bytes(1, '') + f_int(2, 13))
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures', 'onnx', 'mlp.onnx'), 'wb') as f:
        f.write(model)


main()
