#!/usr/bin/env python3
"""What the Python wrapper adds to a Mnemosyne step: fltlab.optim.Mnemosyne.step() against the same
step in C++ (bench_mnemosyne_step: flt::optim::Mnemosyne on the same 1M-parameter model; its rounds
first, then the Python sides' rounds alternating), plus the library's step called straight through the extension (the rule's
`step_parameters` over the same states in optimizer.state), which isolates the Python optimizer's
own bookkeeping. Medians of the rounds, ms per step; and the wrapper's fixed cost per
call alone (step() when no parameter has a gradient), which the machine's noise does not hide.

    PYTHONPATH=build/python python3 bench/bench_python_overhead.py [--rounds 7] [--steps 50]
"""

import argparse
import os
import pathlib
import statistics
import subprocess
import time

import torch

import fltlab

ROOT = pathlib.Path(__file__).resolve().parents[1]


def parameters():
    """bench_optimizer's 1M model: two 1000x500 layers and their biases, 1,001,500 parameters."""
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(*shape))
              for shape in ((1000, 500), (1000,), (500, 1000), (500,))]
    for p in params:
        p.grad = torch.randn_like(p)
    return params


def per_step_ms(step, steps):
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return 1e3 * (time.perf_counter() - start) / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--cpp", default=str(ROOT / "build" / "bench" / "bench_mnemosyne_step"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}

    params = parameters()
    optimizer = fltlab.optim.Mnemosyne(params)
    optimizer.step()  # the state is made at the first step
    states = [optimizer.state[p] for p in params]
    lrs, total_steps = [1.0] * len(params), [0] * len(params)

    def direct():  # the library's step_parameters over the same states, lists made once
        optimizer._rule.step(params, states, lrs, total_steps, None, None)

    # The C++ rounds first, then the two Python sides alternating: a Python step timed right after
    # the C++ process ran was ~35% slower for tens of steps (the schedule's step is ~2 ms), which
    # interleaving all three made the wrapper's cost.
    cpp, wrapper, extension = [], [], []
    for _ in range(args.rounds):
        out = subprocess.run([args.cpp, str(args.steps), "1"], capture_output=True, text=True,
                             env=env, check=True)
        cpp.append(float(out.stdout))
    for _ in range(args.rounds):
        wrapper.append(per_step_ms(optimizer.step, args.steps))
        extension.append(per_step_ms(direct, args.steps))

    # The wrapper's own cost, without the machine's noise in a 70 ms step: step() on the same
    # optimizer when no parameter has a gradient (the library then only walks the groups).
    grads = [p.grad for p in params]
    for p in params:
        p.grad = None
    empty = statistics.median(per_step_ms(optimizer.step, 2000) for _ in range(5))
    for p, g in zip(params, grads):
        p.grad = g

    c, w, e = (statistics.median(x) for x in (cpp, wrapper, extension))
    count = sum(p.numel() for p in params)
    print(f"Mnemosyne step, {count:,} parameters, {args.threads} threads, "
          f"{args.rounds} rounds x {args.steps} steps (median ms per step)")
    print(f"  C++ flt::optim::Mnemosyne           {c:9.3f}")
    print(f"  fltlab.optim.Mnemosyne.step()       {w:9.3f}   {100 * (w / c - 1):+.1f}% vs C++")
    print(f"  fltlab._C step (no Python wrapper)  {e:9.3f}   wrapper {100 * (w / e - 1):+.1f}% "
          f"vs it")
    print(f"  step() without gradients            {1e3 * empty:9.1f} us  "
          f"{100 * empty / c:.3f}% of the C++ step")
    print(f"  rounds C++: {', '.join(f'{x:.2f}' for x in cpp)}")
    print(f"  rounds Python: {', '.join(f'{x:.2f}' for x in wrapper)}")


if __name__ == "__main__":
    main()
