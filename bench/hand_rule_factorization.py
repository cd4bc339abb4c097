"""The hand rule (ScheduleMnemosyne untrained, told the run's length) on mini-batch matrix
completion, against AdamW with a half-cosine decay at five rates: the factorization family's
shape (128 x 256, 256 cells a step, 3000 steps), four instances that differ in noise, observed
fraction and rank. Prints each one's final held-out loss and the ratio to AdamW's best, then the
hand rule's with its step multiplied by 3, 10 and 30 (`lr`).

    PYTHONPATH=build/python python3 bench/hand_rule_factorization.py
"""
import math

import torch

import fltlab.optim

ROWS, COLS, BATCH, STEPS, GAIN = 128, 256, 256, 3000, 0.3
RATES = (3e-3, 1e-2, 3e-2, 1e-1, 3e-1)
HAND_MULTIPLIERS = (3, 10, 30)


def final_held_out_loss(make_optimizer, noise, observed, true_rank, rank, seed=0):
    gen = torch.Generator().manual_seed(seed)
    low_rank = torch.randn(ROWS, true_rank, generator=gen) @ torch.randn(
        true_rank, COLS, generator=gen) / math.sqrt(true_rank)
    target = low_rank + noise * torch.randn(ROWS, COLS, generator=gen)
    mask = (torch.rand(ROWS, COLS, generator=gen) < observed).float()
    u = (torch.randn(ROWS, rank, generator=gen) * math.sqrt(GAIN / rank)).requires_grad_()
    v = (torch.randn(COLS, rank, generator=gen) * math.sqrt(GAIN / rank)).requires_grad_()
    optimizer, schedule = make_optimizer([u, v])
    for _ in range(STEPS):
        cells = torch.randint(ROWS * COLS, (BATCH,), generator=gen)
        i, j = cells // COLS, cells % COLS
        weight = mask.view(-1)[cells]
        error = (u[i] * v[j]).sum(-1) - target.view(-1)[cells]
        loss = (error**2 * weight).sum() / weight.sum().clamp_min(1)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if schedule is not None:
            schedule.step()
    with torch.no_grad():
        return (((u @ v.T - target)**2 * (1 - mask)).sum() / (1 - mask).sum()).item()


def adamw_cosine(lr):
    def make(params):
        optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
        return optimizer, torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, STEPS)
    return make


def hand_rule(params, lr=1.0):
    return fltlab.optim.ScheduleMnemosyne(params, lr=lr, untrained=True, total_steps=STEPS), None


if __name__ == "__main__":
    torch.set_num_threads(1)
    for noise, observed, true_rank, rank in [(0.0, 0.5, 2, 4), (0.02, 0.5, 4, 4), (0.0, 0.2, 4, 8),
                                             (0.2, 0.2, 4, 16)]:
        hand = final_held_out_loss(hand_rule, noise, observed, true_rank, rank)
        adamw = {lr: final_held_out_loss(adamw_cosine(lr), noise, observed, true_rank, rank)
                 for lr in RATES}
        best = min(adamw, key=adamw.get)
        scaled = [final_held_out_loss(lambda p, m=m: hand_rule(p, lr=m), noise, observed, true_rank,
                                      rank) for m in HAND_MULTIPLIERS]
        print(f"noise {noise}, observed {observed}, true rank {true_rank}, rank {rank}: hand rule "
              f"{hand:.2e}, AdamW's best {adamw[best]:.2e} at {best:.0e}, ratio {hand / adamw[best]:.2f}; "
              "hand rule with lr " + ", ".join(f"{m}: {loss:.2e}" for m, loss in zip(HAND_MULTIPLIERS, scaled)))
