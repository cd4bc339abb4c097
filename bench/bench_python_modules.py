#!/usr/bin/env python3
"""What fltlab.nn's ordinary parameters cost: a TransformerLM training step (forward, backward)
through the module, whose parameters are nn.Parameters the library's tensors are pointed at and
whose gradients an autograd.Function hands back, against the same library call made straight on the
library's own tensors (no binding, no Function), in alternating rounds. Medians of the rounds, ms per
step.

    OMP_WAIT_POLICY=PASSIVE PYTHONPATH=build/python python3 bench/bench_python_modules.py [--attention flt]
"""

import argparse
import os
import statistics

import torch

from bench_python_overhead import per_step_ms  # this folder is the script's first import path
from fltlab import nn as fnn


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attention", default="flt")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    lm = fnn.TransformerLM(64, 64, 4, 2, max_length=256, attention=args.attention)
    tokens = torch.randint(0, 64, (8, 256))
    library = [t for _, t in lm._library_parameters]  # the library's own leaf tensors
    lm._bind()

    def through_module():
        lm.zero_grad(set_to_none=True)
        lm(tokens).pow(2).mean().backward()

    def straight():
        for t in library:
            t.grad = None
        lm._cpp.lm_forward(tokens).pow(2).mean().backward()

    through_module(), straight()  # warm-up
    module, direct = [], []
    for _ in range(args.rounds):
        module.append(per_step_ms(through_module, args.steps))
        direct.append(per_step_ms(straight, args.steps))
    m, d = statistics.median(module), statistics.median(direct)
    print(f"TransformerLM(64, 64, 4, 2), {args.attention}, tokens (8, 256), {args.threads} threads, "
          f"{args.rounds} rounds x {args.steps} steps (median ms per forward+backward)")
    print(f"  library call on its own tensors     {d:9.2f}")
    print(f"  fltlab.nn module (nn.Parameters)    {m:9.2f}   {100 * (m / d - 1):+.1f}%")
    print(f"  rounds module: {', '.join(f'{x:.1f}' for x in module)}")
    print(f"  rounds direct: {', '.join(f'{x:.1f}' for x in direct)}")


if __name__ == "__main__":
    main()
