# Makes test/fixtures/torch/inferred_categories.pickle for test/torch/inferred-categories.test.ts:
# one training step recorded with context="all" (free entries carry the freeing stack), one
# allocation per rule of docs/QUERY.md ("Inferred categories"), with frames spelled as real
# snapshots spell them (names and files copied from the corpus: torch/optim/optimizer.py
# `wrapper`, accumulate_grad.cpp's AccumulateGrad frames, the autograd engine's, module.py's).
# Each allocation's size says which case it is (in KiB):
#   1 parameter moved by Module.to       (module.py _apply / convert / to), never freed
#   2 activation                          forward stack, freed by a backward-stack free
#   3 forward temporary                   forward stack, freed in the same forward
#   4 gradient                            AccumulateGrad frames, never freed
#   5 backward temporary                  generated *_backward frames, freed in backward
#   6 optimizer state                     torch/optim frames, never freed
#   7 optimizer temporary                 torch/optim frames, freed in the same step
#   8 two rules                           torch/optim and AccumulateGrad frames: unknown
#   9 live before the trace, no frames, never freed: parameter (lifetime rule)
#  10 live before the trace, forward stack, never freed: unknown
#  11 Linear.__init__ (module constructed on the device)
#
# usage: python3 test/torch/make-category-pickles.py OUTDIR
import os, pickle, sys

out = sys.argv[1]
KB = 1024
SITE = '/usr/lib/python3.11/site-packages/'


def py(name, line, filename):
    return {'filename': filename, 'name': name, 'line': line}


def cpp(name, filename='??'):
    return {'filename': filename, 'name': name, 'line': 0}


ALLOCATOR = [
    cpp('torch::unwind::unwind()'),
    cpp('c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)', 'CUDACachingAllocator.cpp'),
]
FREE = [cpp('torch::unwind::unwind()'), cpp('c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::free(void*)', 'CUDACachingAllocator.cpp')]
TRAIN = [py('main', 90, '/home/u/train.py'), py('<module>', 120, '/home/u/train.py')]
MODULE_CALL = [py('_call_impl', 1747, SITE + 'torch/nn/modules/module.py'), py('_wrapped_call_impl', 1736, SITE + 'torch/nn/modules/module.py')]
FORWARD = ALLOCATOR + [py('forward', 30, '/home/u/model.py')] + MODULE_CALL + TRAIN
ENGINE = [
    cpp('torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&, std::shared_ptr<torch::autograd::ReadyQueue> const&)'),
    cpp('torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)'),
]
ACCUMULATE = [
    cpp('void torch::autograd::AccumulateGrad::accumulateGrad<std::function<void (at::Tensor&&)> >(at::Tensor const&, at::Tensor&, at::Tensor const&, unsigned long, std::function<void (at::Tensor&&)> const&)', ''),
    cpp('torch::autograd::(anonymous namespace)::AccumulateGrad_apply_impl(std::vector<at::Tensor, std::allocator<at::Tensor> >&&, at::Tensor&, at::Tensor&, long, std::function<void (at::Tensor&&)> const&, std::mutex*)', 'accumulate_grad.cpp'),
    cpp('torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)'),
]
BACKWARD_OP = [cpp('at::Tensor torch::autograd::generated::details::mul_tensor_backward<at::Tensor>(at::Tensor const&, at::Tensor, c10::ScalarType)', '')]
OPTIM = [py('step', 82, '/home/u/optimizers.py'), py('wrapper', 493, SITE + 'torch/optim/optimizer.py')] + TRAIN
TO = [py('convert', 1326, SITE + 'torch/nn/modules/module.py'), py('_apply', 928, SITE + 'torch/nn/modules/module.py'),
      py('to', 1340, SITE + 'torch/nn/modules/module.py')] + TRAIN
INIT = [py('__init__', 106, SITE + 'torch/nn/modules/linear.py'), py('__init__', 12, '/home/u/model.py')] + TRAIN

base = 0x7f0000000000
events = []
t = [1000]


def ev(action, addr, size, frames):
    t[0] += 10
    events.append({'action': action, 'addr': addr, 'size': size, 'stream': 0, 'time_us': t[0], 'frames': frames})


def alloc(k, frames):
    ev('alloc', base + k * 0x100000, k * KB, frames)


def free(k, frames):
    ev('free_requested', base + k * 0x100000, k * KB, frames)
    ev('free_completed', base + k * 0x100000, k * KB, frames)


ev('segment_alloc', base, 20 << 20, ALLOCATOR + TRAIN)
# setup: the model is moved to the GPU, a Linear built on it
alloc(1, ALLOCATOR + TO)
alloc(11, ALLOCATOR + INIT)
# forward
alloc(2, FORWARD)
alloc(3, FORWARD)
free(3, FREE + [py('forward', 31, '/home/u/model.py')] + MODULE_CALL + TRAIN)
# backward (the engine's thread: C++ frames only)
alloc(5, ALLOCATOR + BACKWARD_OP + ENGINE)
free(5, FREE + BACKWARD_OP + ENGINE)
free(2, FREE + BACKWARD_OP + ENGINE)
alloc(4, ALLOCATOR + ACCUMULATE + ENGINE)
alloc(8, ALLOCATOR + ACCUMULATE + ENGINE + OPTIM)
# optimizer step
alloc(6, ALLOCATOR + OPTIM)
alloc(7, ALLOCATOR + OPTIM)
free(7, FREE + OPTIM)

live = {1: TO, 4: ACCUMULATE, 6: OPTIM, 8: ACCUMULATE + OPTIM, 9: [], 10: FORWARD, 11: INIT}
blocks = []
for k in sorted(live):
    blocks.append({'address': base + k * 0x100000, 'size': k * KB, 'requested_size': k * KB, 'state': 'active_allocated', 'frames': ALLOCATOR + live[k] if live[k] else []})
seg = {'device': 0, 'address': base, 'total_size': 20 << 20, 'allocated_size': sum(b['size'] for b in blocks),
       'active_size': sum(b['size'] for b in blocks), 'requested_size': sum(b['size'] for b in blocks), 'stream': 0,
       'segment_type': 'large', 'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': [], 'blocks': blocks}
# The segment existed before the trace: its segment_alloc entry above is dropped, as a ring buffer would.
events.pop(0)
with open(os.path.join(out, 'inferred_categories.pickle'), 'wb') as f:
    f.write(pickle.dumps({'segments': [seg], 'device_traces': [events], 'allocator_settings': {}}, protocol=4))
