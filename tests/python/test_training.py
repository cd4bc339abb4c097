"""A plain PyTorch training loop (a torch.nn MLP on Fashion-MNIST from Debian's
dataset-fashion-mnist) with fltlab's Mnemosyne reaches the held-out loss of the same loop in C++
(flt_python_reference fashion: the same data, initial weights and minibatches)."""

import math

import torch
from torch import nn

import fltlab

TRAIN, TEST, STEPS, BATCH, HIDDEN, SEED = 2000, 1000, 150, 64, 64, 11


def test_fashion_mnist_loop_reaches_the_cpp_loops_held_out_loss(reference):
    cpp_loss = float(reference("fashion", TRAIN, TEST, STEPS, BATCH, HIDDEN, SEED))

    data = fltlab.data.fashion_mnist(TRAIN, TEST)
    assert data.train_x.shape == (TRAIN, 1, 28, 28) and data.classes == 10
    torch.manual_seed(SEED)
    values = [torch.randn(HIDDEN, 784) / math.sqrt(784), torch.zeros(HIDDEN),
              torch.randn(10, HIDDEN) / math.sqrt(HIDDEN), torch.zeros(10)]
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 10))
    with torch.no_grad():
        for p, value in zip(model.parameters(), values):
            p.copy_(value)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = fltlab.optim.Mnemosyne(model.parameters(), total_steps=STEPS)
    for t in range(STEPS):
        index = torch.arange(t * BATCH, (t + 1) * BATCH) % TRAIN
        optimizer.zero_grad()
        loss_fn(model(data.train_x[index]), data.train_y[index]).backward()
        optimizer.step()
    with torch.no_grad():
        held_out = loss_fn(model(data.test_x), data.test_y).item()

    print(f"held-out loss: Python {held_out:.9g}, C++ {cpp_loss:.9g}")
    assert held_out < 0.75 * math.log(10)  # it learned (chance: ln 10 = 2.30)
    assert abs(held_out - cpp_loss) <= 1e-6 * cpp_loss, (held_out, cpp_loss)
