"""fltlab.optim: the learned optimizers as torch.optim.Optimizers (the C++ trajectory, groups,
schedulers, closures, state_dict, states of earlier versions) and Swarm."""

import collections
import copy
import io
import math
import pathlib
import warnings

import pytest
import torch
from torch import nn
import torch.nn.functional as F

import fltlab
from fltlab.optim import CoordinateMnemosyne, Mnemosyne, ScheduleMnemosyne, Swarm

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"  # tests/data


def regression_problem(seed):
    """The model and data of `flt_python_reference trajectory`: the same draws in the same order."""
    torch.manual_seed(seed)
    x, y = torch.randn(64, 16), torch.randn(64, 4)
    values = [torch.randn(32, 16) * 0.25, torch.randn(32) * 0.1, torch.randn(4, 32) * 0.25,
              torch.randn(4) * 0.1]
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))  # (draws its own init)
    with torch.no_grad():
        for p, value in zip(model.parameters(), values):
            p.copy_(value)
    return model, x, y


@pytest.mark.parametrize("design, optimizer", [("coordinate-memory", CoordinateMnemosyne),
                                               ("tensor-schedule", ScheduleMnemosyne)])
def test_trajectory_equals_the_cpp_optimizer(design, optimizer, reference, tmp_path):
    steps, seed = 30, 7
    out = tmp_path / "cpp.bin"
    reference("trajectory", out, design, steps, seed)
    blob = out.read_bytes()
    cpp_losses = torch.frombuffer(bytearray(blob[:steps * 8]), dtype=torch.float64)
    cpp_params = torch.frombuffer(bytearray(blob[steps * 8:]), dtype=torch.float32)

    model, x, y = regression_problem(seed)
    opt = optimizer(model.parameters(), total_steps=steps)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
    losses = []
    for t in range(steps):
        if t == 15:
            # Halfway, a new optimizer and scheduler continue from saved states (deep-copied and
            # through torch.save): the trajectory must not notice.
            buffer = io.BytesIO()
            torch.save(copy.deepcopy(opt.state_dict()), buffer)
            scheduler_state = scheduler.state_dict()
            opt = optimizer(model.parameters(), lr=0.123, total_steps=5, memory="none")
            opt.load_state_dict(torch.load(io.BytesIO(buffer.getvalue())))
            scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
            scheduler.load_state_dict(scheduler_state)

        def closure():
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            return loss

        losses.append(opt.step(closure).item())
        scheduler.step()
        if t % 5 == 4:
            with torch.no_grad():
                opt.report_validation(F.mse_loss(model(x), y).item())

    assert type(opt) is optimizer
    assert torch.equal(torch.tensor(losses, dtype=torch.float64), cpp_losses)
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    assert torch.equal(params, cpp_params)
    assert losses[-1] < 0.8 * losses[0]


def test_mnemosyne_is_the_schedule_with_its_hand_rule():
    """The recommended optimizer as a user makes it takes the untrained schedule's steps exactly."""
    assert Mnemosyne is ScheduleMnemosyne
    model, x, y = regression_problem(5)
    twin = copy.deepcopy(model)
    run(Mnemosyne(model.parameters()), model, x, y, 5)
    run(ScheduleMnemosyne(twin.parameters(), untrained=True), twin, x, y, 5)
    for a, b in zip(model.parameters(), twin.parameters()):
        assert torch.equal(a, b)


def test_steps_the_models_own_tensors():
    model, x, y = regression_problem(0)
    weight = model[0].weight
    address = weight.data_ptr()
    before = weight.detach().clone()
    opt = CoordinateMnemosyne(model.parameters())
    assert opt.param_groups[0]["params"][0] is weight
    F.mse_loss(model(x), y).backward()
    opt.step()
    assert model[0].weight is weight and weight.data_ptr() == address
    assert not torch.equal(weight, before)


def test_lr_is_read_at_every_step_and_groups_have_their_own():
    model, x, y = regression_problem(1)
    opt = CoordinateMnemosyne([{"params": model[0].parameters()},
                     {"params": model[2].parameters(), "lr": 0.0}], lr=0.5)
    assert [g["lr"] for g in opt.param_groups] == [0.5, 0.0]
    frozen = model[2].weight.detach().clone()
    moved = model[0].weight.detach().clone()
    F.mse_loss(model(x), y).backward()
    opt.step()
    assert torch.equal(model[2].weight, frozen)  # lr 0: no step
    assert not torch.equal(model[0].weight, moved)
    opt.param_groups[1]["lr"] = 1.0  # as a scheduler would
    opt.zero_grad()
    F.mse_loss(model(x), y).backward()
    opt.step()
    assert not torch.equal(model[2].weight, frozen)
    assert opt.step_sizes()[2] > 0


def test_add_param_group_and_zero_grad():
    model, x, y = regression_problem(2)
    opt = CoordinateMnemosyne(model[0].parameters())
    opt.add_param_group({"params": model[2].parameters(), "lr": 0.25, "total_steps": 100})
    assert opt.param_groups[1]["lr"] == 0.25
    F.mse_loss(model(x), y).backward()
    before = model[2].weight.detach().clone()
    opt.step()
    assert not torch.equal(model[2].weight, before)
    opt.zero_grad()
    assert all(p.grad is None or not p.grad.any() for p in model.parameters())
    with pytest.raises(ValueError, match="parameter 0 of group 2 .* is torch.int64"):
        opt.add_param_group({"params": [torch.zeros(3, dtype=torch.long)]})
    with pytest.raises(ValueError, match="lr must be finite and >= 0, got -2"):
        opt.add_param_group({"params": [nn.Parameter(torch.zeros(3))], "lr": -2})
    assert len(opt.param_groups) == 2


@pytest.mark.parametrize("optimizer", [CoordinateMnemosyne, ScheduleMnemosyne])
def test_the_state_is_in_optimizer_state_and_the_step_uses_it(optimizer):
    # As torch.optim: optimizer.state[p] holds the parameter's tensors, the step reads and updates
    # them in place, and a state cleared or copied there is what the next step continues from.
    model, x, y = regression_problem(6)
    opt = optimizer(model.parameters(), total_steps=30)
    params = list(model.parameters())
    assert len(opt.state) == 0
    run(opt, model, x, y, 3)
    keys = set(optimizer._state_keys())
    assert all(set(opt.state[p]) == keys and opt.state[p]["step"] == 3 for p in params)
    coordinates = opt.state[params[0]][optimizer._coordinates]
    assert coordinates.shape[-1] == params[0].numel()
    before = coordinates.clone()
    run(opt, model, x, y, 1)
    assert opt.state[params[0]][optimizer._coordinates] is coordinates  # updated in place
    assert not torch.equal(coordinates, before)
    # A deep copy of the optimizer (its state and rule) on a copy of the model goes on alike.
    twin_opt = copy.deepcopy(opt)
    twin = copy.deepcopy(model)
    twin_params = list(twin.parameters())
    twin_opt.param_groups[0]["params"] = twin_params
    twin_opt.state = collections.defaultdict(
        dict, {t: copy.deepcopy(opt.state[p]) for p, t in zip(params, twin_params)})
    run(opt, model, x, y, 2)
    run(twin_opt, twin, x, y, 2)
    assert all(torch.equal(a, b) for a, b in zip(params, twin_params))
    # Cleared state: the next step is a first step, as a fresh optimizer's from the same point.
    fresh_model = copy.deepcopy(model)
    fresh = optimizer(fresh_model.parameters(), total_steps=30)
    opt.state.clear()
    run(opt, model, x, y, 1)
    run(fresh, fresh_model, x, y, 1)
    assert all(opt.state[p]["step"] == 1 for p in params)
    assert all(torch.equal(a, b) for a, b in zip(params, fresh_model.parameters()))


def test_closure_loss_is_returned():
    model, x, y = regression_problem(3)
    opt = CoordinateMnemosyne(model.parameters())
    seen = []

    def closure():
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        seen.append(loss)
        return loss

    assert opt.step(closure) is seen[0]
    assert opt.step() is None


def run(opt, model, x, y, steps):
    for _ in range(steps):
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()


def test_state_dict_is_plain_and_load_continues_exactly():
    model, x, y = regression_problem(4)
    twin = copy.deepcopy(model)
    opt = CoordinateMnemosyne(model.parameters(), lr=0.7, total_steps=20)
    run(opt, model, x, y, 5)
    state = opt.state_dict()
    assert type(state) is dict and type(state["state"]) is dict
    assert set(state["state"][0]) == {"step", "state", "controller", "skipped", "last_step_size"}
    assert state["state"][0]["step"] == 5
    assert state["param_groups"][0]["lr"] == 0.7
    copied = copy.deepcopy(state)
    buffer = io.BytesIO()
    torch.save(state, buffer)

    # The twin catches up with the same first 5 steps, then takes the saved state: both go on alike.
    twin_opt = CoordinateMnemosyne(twin.parameters(), lr=0.7, total_steps=20)
    run(twin_opt, twin, x, y, 5)
    fresh = CoordinateMnemosyne(twin.parameters(), memory="performer")
    fresh.load_state_dict(torch.load(io.BytesIO(buffer.getvalue())))
    assert fresh.param_groups[0]["lr"] == 0.7 and fresh.param_groups[0]["total_steps"] == 20
    run(opt, model, x, y, 5)
    run(fresh, twin, x, y, 5)
    for a, b in zip(model.parameters(), twin.parameters()):
        assert torch.equal(a, b)
    # The deep copy was not touched by the steps since.
    assert copied["state"][0]["step"] == 5
    assert torch.equal(copied["state"][0]["state"], torch.load(io.BytesIO(buffer.getvalue()))[
        "state"][0]["state"])


def test_double_parameters_and_the_schedule_state_keep_their_dtypes():
    torch.manual_seed(5)
    p = nn.Parameter(torch.randn(10, dtype=torch.float64))
    opt = ScheduleMnemosyne([p])
    for _ in range(3):
        opt.zero_grad()
        (p ** 2).sum().backward()
        opt.report_loss(float((p ** 2).sum()))
        opt.step()
    state = opt.state_dict()
    assert state["state"][0]["moments"].dtype == torch.float32
    assert state["state"][0]["history"].dtype == torch.float64
    other = ScheduleMnemosyne([p])
    other.load_state_dict(copy.deepcopy(state))
    assert other.state_dict()["state"][0]["history"].dtype == torch.float64


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(lr=-1.0), ValueError, "lr must be finite and >= 0, got -1"),
    (dict(lr=math.nan), ValueError, "lr must be finite and >= 0, got nan"),
    (dict(lr="fast"), TypeError, "lr must be a number, got 'fast'"),
    (dict(total_steps=-3), ValueError, "total_steps must be >= 0 or None, got -3"),
    (dict(memory="lsmt"), ValueError, "unknown memory 'lsmt', expected one of"),
    (dict(untrained=True, weights="w.pt"), ValueError, "untrained=True and weights='w.pt'"),
    (dict(weights="/nonexistent/weights.pt"), RuntimeError, "/nonexistent/weights.pt"),
    (dict(design="tensor-schedule"), TypeError, "design"),  # fltlab 0.1's keyword: two classes now
])
@pytest.mark.parametrize("optimizer", [CoordinateMnemosyne, ScheduleMnemosyne])
def test_bad_options_raise_as_torch_optim_naming_the_value(optimizer, kwargs, error, message):
    if optimizer is ScheduleMnemosyne and "weights" in kwargs and "untrained" not in kwargs:
        message = "cannot open /nonexistent/weights.pt"
    with pytest.raises(error, match=message):
        optimizer([nn.Parameter(torch.zeros(3))], **kwargs)


def test_an_absolute_looking_lr_warns_once_at_construction():
    with pytest.warns(UserWarning, match=r"lr=0.001 multiplies the learned step"):
        CoordinateMnemosyne([nn.Parameter(torch.zeros(3))], lr=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CoordinateMnemosyne([nn.Parameter(torch.zeros(3))], lr=0.5)  # a scale of the rule's step: silent


def test_skipped_non_finite_gradients_warn_once():
    p = nn.Parameter(torch.ones(4))
    opt = ScheduleMnemosyne([p])
    p.grad = torch.tensor([1.0, math.nan, 1.0, 1.0])
    with pytest.warns(RuntimeWarning, match=r"1 coordinate update\(s\) skipped"):
        opt.step()
    assert opt.skipped() == 1 and math.isfinite(float(p.sum()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()  # skips again, counted, not warned again
    assert opt.skipped() == 2


def test_a_state_dict_of_fltlab_0_1_continues_exactly():
    # fltlab 0.1's one Mnemosyne class with design="tensor-schedule" (tests/data/README.md): its
    # per-parameter entries were named "state" and "controller".
    saved = torch.load(DATA / "fltlab_0.1_tensor_schedule.pt")
    p = nn.Parameter(saved["param"].clone())
    opt = ScheduleMnemosyne([p])
    opt.load_state_dict(saved["state_dict"])
    assert opt.param_groups[0]["lr"] == 0.5 and opt.param_groups[0]["total_steps"] == 40
    weights = torch.arange(1, 7, dtype=torch.float32)
    for _ in range(3):
        opt.zero_grad()
        loss = (p * p * weights).sum()
        loss.backward()
        opt.report_loss(float(loss))
        opt.step()
    assert torch.equal(p.detach(), saved["after"])
    # The other learned optimizer names the class the state belongs to.
    with pytest.raises(RuntimeError, match="ScheduleMnemosyne"):
        CoordinateMnemosyne([nn.Parameter(saved["param"].clone())]).load_state_dict(
            opt.state_dict())


def test_bad_lr_set_between_steps_is_named():
    p = nn.Parameter(torch.ones(3))
    opt = CoordinateMnemosyne([p])
    opt.param_groups[0]["lr"] = -0.5
    p.grad = torch.ones(3)
    with pytest.raises(RuntimeError, match="got -0.5"):
        opt.step()


def test_loading_another_optimizers_state_is_named():
    p = nn.Parameter(torch.ones(3))
    adam = torch.optim.Adam([p])
    p.grad = torch.ones(3)
    adam.step()
    with pytest.raises(RuntimeError, match="exp_avg"):
        CoordinateMnemosyne([p]).load_state_dict(adam.state_dict())


def test_wrong_state_shape_is_named_at_the_next_step():
    p = nn.Parameter(torch.ones(4))
    opt = CoordinateMnemosyne([p])
    p.grad = torch.ones(4)
    opt.step()
    state = opt.state_dict()
    state["state"][0]["state"] = torch.zeros(3, 3)
    opt.load_state_dict(state)
    with pytest.raises(RuntimeError, match=r"must be \(\d+, 4\), got \[3, 3\]"):
        opt.step()


def sphere(x):
    return ((x - 1.5) ** 2).sum(dim=1)


def test_swarm_minimize_and_ask_tell():
    result = Swarm(particles=16, seed=3).minimize(sphere, lower=[-5, -5], upper=[5, 5],
                                                  budget=800)
    assert result.evaluations == 800
    assert result.best_value < 1e-2
    assert torch.allclose(result.best_x, torch.tensor([1.5, 1.5], dtype=torch.float64),
                          atol=0.1)
    assert result.best_history[-1] == result.best_value

    swarm = Swarm(particles=8, seed=1, budget=400)
    swarm.reset(lower=[-5.0] * 3, upper=[5.0] * 3)
    first = None
    for _ in range(50):
        x = swarm.ask()
        assert x.shape == (8, 3) and x.dtype == torch.float64
        swarm.tell(sphere(x))
        first = swarm.best_value if first is None else first
    assert swarm.best_value < first
    assert swarm.attention_weights().shape[-2:] == (8, 8)
    around = Swarm(seed=2).minimize(sphere, x0=[0.0, 0.0], budget=200)
    assert around.evaluations == 200


def test_swarm_errors():
    with pytest.raises(RuntimeError, match="lstmm"):
        Swarm(variant="lstmm")
    swarm = Swarm()
    with pytest.raises(RuntimeError, match="lower"):
        swarm.reset(lower=[1.0, 0.0], upper=[0.0, 1.0])

    def broken(x):
        raise ValueError("objective failed at " + str(x.shape[0]))

    with pytest.raises(ValueError, match="objective failed"):
        swarm.minimize(broken, lower=[0, 0], upper=[1, 1], budget=50)


def test_package_lists_what_ships():
    assert "flt" in fltlab.optim.pretrained_memories()
    assert fltlab.__version__
