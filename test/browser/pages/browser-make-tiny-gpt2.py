#!/usr/bin/env python3
"""Writes test/fixtures/transformers/tiny-gpt2/: a GPT-2-shaped model in transformers.js's layout,
small enough to commit and run under SwiftShader, with no torch, onnx or Hub download.

    config.json            model_type gpt2: 2 layers, 2 heads, n_embd 32, a 256-token vocabulary
    tokenizer.json         byte-level BPE over GPT-2's 256 byte symbols, no merges (one token a byte)
    tokenizer_config.json  GPT2Tokenizer
    onnx/model.onnx        the decoder (ONNX opset 13, protobuf written by hand below)

The decoder has GPT-2's interface as transformers.js runs it: inputs input_ids and
attention_mask [batch, seq] and, per layer i, past_key_values.i.key / .value
[batch, 2, past, 16]; outputs logits [batch, seq, 256] and present.i.key / .value
[batch, 2, past + seq, 16]. Inside, each layer's key and value are the token embeddings times a
32×32 matrix, split into 2 heads and appended to the past along the sequence axis, so the cache
grows by one position a generated token; logits are the embeddings times a 32×256 matrix. It
says nothing sensible; it generates, with a KV cache that grows.

Weights are deterministic (a linear congruential sequence), raw float32 initializers:
wte 256×32 + 2 layers × (Wk + Wv) 32×32 + lm_head 32×256 = 81920 bytes.
Used by test/browser/browser-transformers.test.ts. Run: python3 test/browser/pages/browser-make-tiny-gpt2.py
"""
import json
import os
import struct

LAYERS, HEADS, EMBED, VOCAB = 2, 2, 32, 256
HEAD_DIM = EMBED // HEADS


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


FLOAT, INT64 = 1, 7


def tensor_float(name, dims, values):
    raw = struct.pack('<%df' % len(values), *values)
    return b''.join(f_int(1, d) for d in dims) + f_int(2, FLOAT) + f_bytes(8, name) + f_bytes(9, raw)


def tensor_int64(name, values):
    raw = struct.pack('<%dq' % len(values), *values)
    return f_int(1, len(values)) + f_int(2, INT64) + f_bytes(8, name) + f_bytes(9, raw)


def value_info(name, elem_type, dims):
    """dims: ints (dim_value) or strings (dim_param, a symbolic size)."""
    def dim(d):
        return f_bytes(1, f_int(1, d) if isinstance(d, int) else f_bytes(2, d))
    shape = b''.join(dim(d) for d in dims)
    tensor_type = f_int(1, elem_type) + f_bytes(2, shape)
    return f_bytes(1, name) + f_bytes(2, f_bytes(1, tensor_type))


def attribute_int(name, value):
    return f_bytes(1, name) + f_int(3, value) + f_int(20, 2)  # type INT


def attribute_ints(name, values):
    return f_bytes(1, name) + b''.join(f_int(8, v) for v in values) + f_int(20, 7)  # type INTS


def node(op, inputs, outputs, name, attributes=()):
    return (b''.join(f_bytes(1, i) for i in inputs) + b''.join(f_bytes(2, o) for o in outputs)
            + f_bytes(3, name) + f_bytes(4, op) + b''.join(f_bytes(5, a) for a in attributes))


def weights(count, seed):
    state = seed
    out = []
    for _ in range(count):
        state = (state * 1103515245 + 12345) % (1 << 31)
        out.append((state / (1 << 31) - 0.5) * 0.2)
    return out


def decoder():
    nodes = [node('Gather', ['wte', 'input_ids'], ['embeddings'], 'embed', [attribute_int('axis', 0)])]
    initializers = [
        tensor_float('wte', [VOCAB, EMBED], weights(VOCAB * EMBED, 1)),
        tensor_float('lm_head', [EMBED, VOCAB], weights(EMBED * VOCAB, 2)),
        tensor_int64('heads_shape', [0, 0, HEADS, HEAD_DIM]),
    ]
    inputs = [value_info('input_ids', INT64, ['batch_size', 'sequence_length']),
              value_info('attention_mask', INT64, ['batch_size', 'total_sequence_length'])]
    outputs = [value_info('logits', FLOAT, ['batch_size', 'sequence_length', VOCAB])]
    for i in range(LAYERS):
        for kind, seed in (('key', 10 + 2 * i), ('value', 11 + 2 * i)):
            w = f'h.{i}.{kind}.weight'
            initializers.append(tensor_float(w, [EMBED, EMBED], weights(EMBED * EMBED, seed)))
            nodes += [
                node('MatMul', ['embeddings', w], [f'h.{i}.{kind}'], f'h.{i}.{kind}.proj'),
                node('Reshape', [f'h.{i}.{kind}', 'heads_shape'], [f'h.{i}.{kind}.heads'], f'h.{i}.{kind}.split'),
                node('Transpose', [f'h.{i}.{kind}.heads'], [f'h.{i}.{kind}.new'], f'h.{i}.{kind}.transpose', [attribute_ints('perm', [0, 2, 1, 3])]),
                node('Concat', [f'past_key_values.{i}.{kind}', f'h.{i}.{kind}.new'], [f'present.{i}.{kind}'], f'h.{i}.{kind}.cache', [attribute_int('axis', 2)]),
            ]
            inputs.append(value_info(f'past_key_values.{i}.{kind}', FLOAT, ['batch_size', HEADS, 'past_sequence_length', HEAD_DIM]))
            outputs.append(value_info(f'present.{i}.{kind}', FLOAT, ['batch_size', HEADS, 'total_sequence_length', HEAD_DIM]))
    nodes.append(node('MatMul', ['embeddings', 'lm_head'], ['logits'], 'lm_head'))
    graph = b''.join([
        b''.join(f_bytes(1, n) for n in nodes),
        f_bytes(2, 'tiny-gpt2'),
        b''.join(f_bytes(5, t) for t in initializers),
        b''.join(f_bytes(11, v) for v in inputs),
        b''.join(f_bytes(12, v) for v in outputs),
    ])
    return f_int(1, 8) + f_bytes(2, 'memscope-test') + f_bytes(7, graph) + f_bytes(8, f_bytes(1, '') + f_int(2, 13))


def byte_symbols():
    """GPT-2's bytes_to_unicode: a printable character for each of the 256 byte values."""
    printable = list(range(ord('!'), ord('~') + 1)) + list(range(ord('¡'), ord('¬') + 1)) + list(range(ord('®'), ord('ÿ') + 1))
    symbols = {}
    extra = 0
    for b in range(256):
        if b in printable:
            symbols[b] = chr(b)
        else:
            symbols[b] = chr(256 + extra)
            extra += 1
    return [symbols[b] for b in range(256)]


def tokenizer():
    byte_level = {'type': 'ByteLevel', 'add_prefix_space': False, 'trim_offsets': True, 'use_regex': True}
    return {
        'version': '1.0',
        'truncation': None,
        'padding': None,
        'added_tokens': [],
        'normalizer': None,
        'pre_tokenizer': byte_level,
        'post_processor': byte_level,
        'decoder': byte_level,
        'model': {
            'type': 'BPE', 'dropout': None, 'unk_token': None, 'continuing_subword_prefix': '', 'end_of_word_suffix': '',
            'fuse_unk': False, 'byte_fallback': False, 'ignore_merges': False,
            'vocab': {s: i for i, s in enumerate(byte_symbols())}, 'merges': [],
        },
    }


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures', 'transformers', 'tiny-gpt2')
    os.makedirs(os.path.join(root, 'onnx'), exist_ok=True)
    config = {'model_type': 'gpt2', 'architectures': ['GPT2LMHeadModel'], 'n_layer': LAYERS, 'n_head': HEADS, 'n_embd': EMBED,
              'n_positions': 128, 'vocab_size': VOCAB}
    files = {
        'config.json': config,
        'tokenizer.json': tokenizer(),
        'tokenizer_config.json': {'tokenizer_class': 'GPT2Tokenizer', 'model_max_length': 128, 'add_prefix_space': False},
    }
    for name, value in files.items():
        with open(os.path.join(root, name), 'w', encoding='utf-8') as f:
            json.dump(value, f, ensure_ascii=False, indent=1)
            f.write('\n')
    with open(os.path.join(root, 'onnx', 'model.onnx'), 'wb') as f:
        f.write(decoder())


main()
