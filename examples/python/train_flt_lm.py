#!/usr/bin/env python3
"""A small character-level language model with FLT attention, trained by the learned optimizer
Mnemosyne: the whole of fltlab in a PyTorch training loop.

    python3 examples/python/train_flt_lm.py [--steps 200] [--text FILE]

(from a build tree: PYTHONPATH=build/python; after `cmake --install`, nothing). It reads a text
(default: this file), trains for --steps steps on random windows and prints the training loss every
few steps and the held-out loss at the start and at the end.
"""

import argparse
import pathlib

import torch
import torch.nn.functional as F

import fltlab


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--text", type=pathlib.Path, default=pathlib.Path(__file__))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)

    text = args.text.read_bytes()
    ids = torch.tensor(list(text), dtype=torch.long)
    split = int(0.9 * len(ids))
    train, held_out = ids[:split], ids[split:]
    window, batch = 32, 16

    # The model: every layer's attention is FLT (positions come from its learned RPE, so no
    # position embedding), and the optimizer is Mnemosyne; both are ordinary PyTorch objects.
    model = fltlab.nn.TransformerLM(vocab_size=256, embed_dim=32, heads=2, layers=2,
                                    attention="flt", features=16, rpe_features=16)
    optimizer = fltlab.optim.Mnemosyne(model.parameters(), total_steps=args.steps)

    def loss_on(data, starts):
        x = torch.stack([data[s:s + window + 1] for s in starts.tolist()])
        logits = model(x[:, :-1])
        return F.cross_entropy(logits.reshape(-1, 256), x[:, 1:].reshape(-1))

    eval_starts = torch.arange(0, len(held_out) - window - 1, window)[:32]
    with torch.no_grad():
        print(f"held-out loss before: {loss_on(held_out, eval_starts).item():.4f}")
    for step in range(1, args.steps + 1):
        starts = torch.randint(0, len(train) - window - 1, (batch,))

        def closure():
            optimizer.zero_grad()
            loss = loss_on(train, starts)
            loss.backward()
            return loss

        loss = optimizer.step(closure)
        if step % 20 == 0 or step == args.steps:
            print(f"step {step:4d}  training loss {loss.item():.4f}")
    with torch.no_grad():
        print(f"held-out loss after: {loss_on(held_out, eval_starts).item():.4f}")


if __name__ == "__main__":
    main()
