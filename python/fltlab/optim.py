"""The library's optimizers as PyTorch optimizers.

``CoordinateMnemosyne`` and ``ScheduleMnemosyne`` are ``torch.optim.Optimizer``s: their parameter
groups are PyTorch's (``lr`` and ``total_steps`` are read at every step, so
``torch.optim.lr_scheduler`` works), and each step is the C++ optimizer's step on the model's own
tensors: the same trajectory as a C++ loop. ``Mnemosyne`` is the one the library recommends
(``flt::optim::Mnemosyne``). ``Swarm`` is the population-based learned optimizer, for a Python
objective.
"""

import itertools
import math
import warnings
from typing import Callable, List, NamedTuple, Optional

import torch

from . import _C

__all__ = ["Mnemosyne", "CoordinateMnemosyne", "ScheduleMnemosyne", "Swarm", "SearchResult",
           "pretrained_memories"]


def pretrained_memories() -> List[str]:
    """Memory kinds whose meta-trained weights ship with the library ("flt", ...)."""
    return _C.pretrained_memories()


# Memory kinds of the learned rules (flt::optim::Memory).
_MEMORIES = ("flt", "performer", "none", "lstm", "ema")
# An lr at or below this looks like an absolute learning rate typed out of habit (Adam's 1e-3):
# the learned optimizers' lr multiplies their own step, so 1e-3 shrinks it a thousandfold.
_ABSOLUTE_LR_LOOKING = 0.01


def _total_steps(value) -> int:
    return 0 if value is None else int(value)


class _LearnedOptimizer(torch.optim.Optimizer):
    """What both learned optimizers share; a subclass names its rule's class and state keys.

    As every torch.optim optimizer, the per-parameter state lives in ``self.state[p]`` (a dict of
    tensors and numbers); a step hands the parameters, their gradients and those states to the
    library's step (``step_parameters``), which updates them in place, the pattern of PyTorch's
    fused optimizers. The optimizer itself holds only the learned rule, like a hyperparameter.
    """

    _rule_class = None
    # The keys of a parameter's state: step, the per-coordinate tensor, the per-tensor tensor,
    # skipped, last_step_size.
    _coordinates = _tensor = ""
    # Keys an earlier version's state_dict gave the two tensors (None: the same).
    _old_keys = None

    def __init__(self, params, lr: float = 1.0, total_steps: Optional[int] = None,
                 memory: str = "flt", weights: Optional[str] = None, untrained: bool = False):
        name = type(self).__name__
        if memory not in _MEMORIES:
            raise ValueError(f"{name}: unknown memory {memory!r}, expected one of {_MEMORIES}")
        if untrained and weights:
            raise ValueError(f"{name}: untrained=True and weights={weights!r} contradict each "
                             f"other: the untrained rule has no weights")
        lr_value = self._checked_lr(lr)
        if 0 < lr_value <= _ABSOLUTE_LR_LOOKING:
            warnings.warn(
                f"{name}: lr={lr} multiplies the learned step (1 = the rule's own step size); it "
                f"is not an absolute learning rate like Adam's, and at {lr} the optimizer barely "
                f"moves. Leave lr at 1 unless you mean to scale the rule's step.", stacklevel=2)
        self._memory, self._weights, self._untrained = memory, weights or "", bool(untrained)
        self._rule = self._rule_class(memory, self._weights, self._untrained)
        self._reported_loss = self._reported_validation = None
        self._warned_skipped = False
        super().__init__(params, dict(lr=lr, total_steps=total_steps))

    @classmethod
    def _state_keys(cls):
        return ("step", cls._coordinates, cls._tensor, "skipped", "last_step_size")

    def _checked_lr(self, lr) -> float:
        # As torch.optim: a bad value is a ValueError naming it, a non-number a TypeError.
        name = type(self).__name__
        try:
            value = float(lr)  # numpy scalars and one-element tensors too
        except (TypeError, ValueError):
            raise TypeError(f"{name}: lr must be a number, got {lr!r}") from None
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name}: lr must be finite and >= 0, got {lr}")
        return value

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        try:
            name = type(self).__name__
            self._checked_lr(group["lr"])
            steps = group["total_steps"]
            if steps is not None and int(steps) < 0:
                raise ValueError(f"{name}: total_steps must be >= 0 or None, got {steps}")
            for index, p in enumerate(group["params"]):
                if not p.is_floating_point():
                    raise ValueError(f"{name}: parameter {index} of group "
                                     f"{len(self.param_groups) - 1} (shape {list(p.shape)}) is "
                                     f"{p.dtype}; a learned optimizer steps floating point "
                                     f"tensors only")
        except Exception:
            self.param_groups.pop()
            raise

    @torch.no_grad()
    def step(self, closure: Optional[Callable] = None):
        """One step of every parameter with a gradient; returns the closure's loss (or None)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
            if loss is not None and (not isinstance(loss, torch.Tensor) or loss.numel() == 1):
                self._reported_loss = float(loss)
        params, states, lrs, total_steps = [], [], [], []
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                params.append(p)
                states.append(self.state[p])
                lrs.append(float(group["lr"]))
                total_steps.append(_total_steps(group["total_steps"]))
        self._rule.step(params, states, lrs, total_steps, *self._reports())
        self._reported_loss = self._reported_validation = None  # each report is read by one step
        if not self._warned_skipped and self.skipped() > 0:
            self._warned_skipped = True
            warnings.warn(
                f"{type(self).__name__}: {self.skipped()} coordinate update(s) skipped because "
                f"their gradient was NaN or Inf (those coordinates keep their value and state; "
                f"skipped() counts them). Warned once.", RuntimeWarning, stacklevel=2)
        return loss

    def _reports(self):
        """The loss and validation metric the coming step records (None: not reported)."""
        return self._reported_loss, self._reported_validation

    def report_loss(self, loss: float) -> None:
        """The training loss of the coming step, for loops that call step() without a closure."""
        self._reported_loss = float(loss)

    def report_validation(self, metric: float) -> None:
        """A validation metric (lower is better), whenever the loop evaluates one."""
        self._reported_validation = float(metric)

    def skipped(self) -> int:
        """Coordinate updates skipped so far because their gradient was not finite."""
        return sum(int(state.get("skipped", 0)) for state in self.state.values())

    def step_sizes(self) -> List[float]:
        """The step size each parameter took at its last step (lr included), in order; 0 for a
        parameter not stepped yet."""
        return [float(self.state[p]["last_step_size"]) if p in self.state else 0.0
                for group in self.param_groups for p in group["params"]]

    def state_dict(self):
        state_dict = super().state_dict()
        state_dict["rule"] = self._rule.to_bytes()
        return state_dict

    def __getstate__(self):  # pickling and copy.deepcopy: the rule travels as its bytes
        state = super().__getstate__()
        state.update(_rule=self._rule.to_bytes(), _memory=self._memory, _weights=self._weights,
                     _untrained=self._untrained, _warned_skipped=self._warned_skipped,
                     _reported_loss=self._reported_loss,
                     _reported_validation=self._reported_validation)
        return state

    def __setstate__(self, state):
        # Also called by torch.optim's load_state_dict with the state and groups alone.
        state = dict(state)
        rule = state.pop("_rule", None)
        super().__setstate__(state)
        if rule is not None:
            self._rule = self._rule_class(self._memory, self._weights, self._untrained, rule)

    def _entry(self, key, entry):
        # One saved parameter state with this class's keys (an earlier version's keys renamed).
        if self._old_keys is not None and self._coordinates not in entry:
            old_coordinates, old_tensor = self._old_keys
            if old_coordinates in entry and old_tensor in entry:
                entry = dict(entry)
                entry[self._coordinates] = entry.pop(old_coordinates)
                entry[self._tensor] = entry.pop(old_tensor)
        missing = [k for k in self._state_keys() if k not in entry]
        name = type(self).__name__
        for other in _LearnedOptimizer.__subclasses__():
            if missing and all(k in entry for k in other._state_keys()):
                raise RuntimeError(
                    f"{name}.load_state_dict: the state of parameter {key} is a "
                    f"{other.__name__} state; load it with fltlab.optim.{other.__name__}")
        if missing:
            raise RuntimeError(
                f"{name}.load_state_dict: the state of parameter {key} has the keys "
                f"{sorted(entry)}, a {name} state has {list(self._state_keys())} (is it another "
                f"optimizer's?)")
        return entry

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        rule = state_dict.pop("rule", None)
        saved_state = {key: self._entry(key, entry)
                       for key, entry in state_dict.get("state", {}).items()}
        for index, group in enumerate(state_dict.get("param_groups", [])):
            if "total_steps" not in group:
                name = type(self).__name__
                raise RuntimeError(
                    f"{name}.load_state_dict: parameter group {index} has the options "
                    f"{sorted(k for k in group if k != 'params')}, a {name} group has lr and "
                    f"total_steps (is it another optimizer's?)")
        if rule is not None:
            self._rule = self._rule_class(self._memory, self._weights, self._untrained, rule)
        # The groups: PyTorch's checks and lr, total_steps. It also casts the state's tensors to
        # each parameter's dtype; the library's own dtypes are restored below.
        super().load_state_dict(dict(state_dict, state=saved_state))
        saved_ids = itertools.chain.from_iterable(g["params"] for g in state_dict["param_groups"])
        params = [p for g in self.param_groups for p in g["params"]]
        for p, saved_id in zip(params, saved_ids):
            entry = saved_state.get(saved_id)
            if entry is None:
                continue
            self.state[p] = {
                "step": int(entry["step"]),
                # Per coordinate: float32 on the parameter's device; per tensor: the CPU, in the
                # dtype it was saved in (the library converts an old one at the next step).
                self._coordinates: entry[self._coordinates].detach().to(
                    device=p.device, dtype=torch.float32, copy=True),
                self._tensor: entry[self._tensor].detach().to(device="cpu", copy=True),
                "skipped": int(entry["skipped"]),
                "last_step_size": float(entry["last_step_size"]),
            }


_COMMON_ARGS = """
    Args:
        params: parameters or parameter groups, as for any torch.optim optimizer.
        lr: multiplier on the rule's own step (1, the default, is the step the rule chose); per
            group. Not an absolute learning rate: Adam's habitual 1e-3 would shrink every step a
            thousandfold (a warning says so for lr <= 0.01).
        total_steps: the run's length when known (None: unknown); the step then anneals to 0 along
            a half cosine at that step. Per group.
        memory: the memory cell whose pretrained weights are used: "flt" (default), "performer",
            "lstm" or "none"; "ema" (exponential averages, the FLT memory's ablation) ships no
            weights and is used with ``untrained=True`` or ``weights``.
        weights: a weights file written by flt-metatrain, instead of the pretrained weights.
        untrained: the rule with its learned part zeroed (the ablation baseline), whatever ships.

    Bad values raise ``ValueError`` (as torch.optim), unknown keywords ``TypeError``. Coordinates
    whose gradient is NaN or Inf keep their value and state; ``skipped()`` counts them and the
    first step that skips one warns (once).

    ``state_dict()`` holds each parameter's state and the learned rule itself ("rule", bytes), so
    ``load_state_dict`` continues exactly, whatever weights the new optimizer was made with.
"""


class CoordinateMnemosyne(_LearnedOptimizer):
    __doc__ = """The learned optimizer with a memory per coordinate
    (flt::optim::CoordinateMnemosyne): an FLT cell over the step index and a per-tensor step-size
    controller; the shipped weights of ``memory`` by default (pretrained_memories()).
    """ + _COMMON_ARGS
    _rule_class = _C.CoordinateMnemosyneRule
    _coordinates, _tensor = "state", "controller"


class ScheduleMnemosyne(_LearnedOptimizer):
    __doc__ = """The learned optimizer with a learned per-tensor schedule whose memory sees the
    whole run, over Adam's moments (flt::optim::ScheduleMnemosyne). It reads the training loss (a
    closure's, or report_loss) and report_validation. No schedule weights ship yet: by default it
    is the untrained schedule, Adam with a step of 2% of each tensor's RMS that a hand rule grows
    (at most 4x) while successive steps agree and shrinks when they stop.
    """ + _COMMON_ARGS + """
        process_group: the ranks of a data-parallel run (torch.distributed; e.g.
            ``torch.distributed.group.WORLD``). Each rank reports its own shard's loss; with a
            group, every step() all-reduces the reports and every rank records the mean over the
            ranks that reported each (a metric rank 0 alone evaluates is rank 0's), so the ranks'
            states stay bit-identical, as DistributedDataParallel keeps their gradients. Every rank
            must then call step() at the same steps. None (default): this process's own reports
            (a process of an initialised group of several ranks that reports a loss warns once).
            Neither pickled nor in the state_dict, as DDP's. flt::optim's option
            ``communicator`` does the same in C++, with the same bits.
    """
    _rule_class = _C.ScheduleMnemosyneRule
    _coordinates, _tensor = "moments", "history"
    # fltlab 0.1's Mnemosyne(design="tensor-schedule") saved them as "state" and "controller".
    _old_keys = ("state", "controller")
    # Class defaults: an unpickled or deep-copied optimizer has no group (a process's connection).
    _process_group = None
    _warned_unreduced = False

    def __init__(self, params, lr: float = 1.0, total_steps: Optional[int] = None,
                 memory: str = "flt", weights: Optional[str] = None, untrained: bool = False, *,
                 process_group=None):
        super().__init__(params, lr=lr, total_steps=total_steps, memory=memory, weights=weights,
                         untrained=untrained)
        self._process_group = process_group

    def _reports(self):
        loss, validation = super()._reports()
        if self._process_group is None:
            self._warn_unreduced(loss, validation)
            return loss, validation
        # (sum, count) pairs in float64, as flt::optim::ScheduleMnemosyne sums them in C++.
        sums = torch.tensor([0.0 if loss is None else loss, float(loss is not None),
                             0.0 if validation is None else validation,
                             float(validation is not None)], dtype=torch.float64)
        torch.distributed.all_reduce(sums, group=self._process_group)
        loss_sum, losses, validation_sum, validations = sums.tolist()
        return (loss_sum / losses if losses > 0 else None,
                validation_sum / validations if validations > 0 else None)

    def _warn_unreduced(self, loss, validation):
        if self._warned_unreduced or (loss is None and validation is None):
            return
        distributed = torch.distributed
        if not (distributed.is_available() and distributed.is_initialized()
                and distributed.get_world_size() > 1):
            return
        self._warned_unreduced = True
        warnings.warn(
            f"ScheduleMnemosyne: this process is rank {distributed.get_rank()} of "
            f"{distributed.get_world_size()} and records its own reported loss and validation, so "
            f"the ranks' optimizer states differ; in data-parallel training pass "
            f"process_group=torch.distributed.group.WORLD to average the reports over the ranks. "
            f"Warned once.", RuntimeWarning, stacklevel=3)


# The learned optimizer the library recommends (flt::optim::Mnemosyne): the schedule with its hand
# rule (the ES campaign did not beat it on held-out families; docs/learned-optimizer.md).
Mnemosyne = ScheduleMnemosyne


class SearchResult(NamedTuple):
    best_x: torch.Tensor
    best_value: float
    evaluations: int
    best_history: List[float]
    evaluation_history: List[int]


def _box(values):
    return torch.as_tensor(values, dtype=torch.float64).reshape(-1)


class Swarm:
    """The population-based learned optimizer (flt::optim::Swarm): P particles in a box that attend
    to each other through FLT attention. Derivative-free unless ``use_gradients``.

    Ask/tell::

        swarm = fltlab.optim.Swarm(particles=16)
        swarm.reset(lower=[-5, -5], upper=[5, 5])
        for _ in range(50):
            x = swarm.ask()                 # (P, n) float64
            swarm.tell(f(x))                # (P) values; NaN and inf rank last
        swarm.best_x, swarm.best_value

    or ``swarm.minimize(f, lower=..., upper=..., budget=...)`` (or ``x0=``: the box x0 +- 5).
    """

    def __init__(self, particles: int = 16, variant: str = "flt", initial_sigma: float = 1.0,
                 use_gradients: bool = False, budget: int = 0, seed: int = 0,
                 weights: Optional[str] = None):
        self._impl = _C.Swarm(particles, variant, initial_sigma, use_gradients, budget, seed,
                              weights or "")

    def reset(self, lower, upper) -> None:
        """Starts a new search in the box [lower, upper] (each (n))."""
        self._impl.reset(_box(lower), _box(upper))

    def ask(self) -> torch.Tensor:
        return self._impl.ask()

    def tell(self, values, gradients: Optional[torch.Tensor] = None) -> None:
        self._impl.tell(torch.as_tensor(values, dtype=torch.float64), gradients)

    def set_budget(self, budget: int) -> None:
        self._impl.set_budget(int(budget))

    def minimize(self, f: Callable, x0=None, *, lower=None, upper=None,
                 budget: Optional[int] = None) -> SearchResult:
        """Minimises f: (P, n) float64 -> (P) over the box [lower, upper] or x0 +- 5, spending
        ``budget`` evaluations (default 200 per dimension)."""
        def objective(x):
            return torch.as_tensor(f(x), dtype=torch.float64)

        if x0 is not None:
            x0 = _box(x0)
            n = x0.numel()
        else:
            if lower is None or upper is None:
                raise RuntimeError("Swarm.minimize: give x0, or lower and upper")
            lower, upper = _box(lower), _box(upper)
            n = lower.numel()
        if budget is None:
            budget = _C.swarm_default_budget_per_dim * n
        if x0 is not None:
            result = self._impl.minimize_around(objective, x0, int(budget))
        else:
            result = self._impl.minimize(objective, lower, upper, int(budget))
        return SearchResult(**result)

    @property
    def best_x(self) -> torch.Tensor:
        return self._impl.best_x()

    @property
    def best_value(self) -> float:
        return self._impl.best_value()

    @property
    def name(self) -> str:
        return self._impl.name()

    def attention_weights(self) -> torch.Tensor:
        """Attention among the particles at the current state: (H, P, P)."""
        return self._impl.attention_weights()
