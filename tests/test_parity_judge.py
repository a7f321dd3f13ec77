"""How ``multigpu parity`` judges two backends' runs (toolkit.tolerances.judge_parity): against the smaller backend's
own divergence, step by step and parameter by parameter, up to a split. Framework-free: the curves are made here,
shaped as the measured ones are (docs/guides/compare.md, "Parity")."""

from __future__ import annotations

import pytest

from toolkit.command.perturb import Perturbation, parse_perturbation
from toolkit.errors import ArgumentError
from toolkit.tolerances import (
    FLOAT32_DRIFT,
    FLOAT32_RTOL,
    JUMP_FACTOR,
    NULL_FACTOR,
    SPLIT_BOUND,
    judge_parity,
    reference_null,
)

STEPS = 20
#: Rounding-level divergence, relative to the parameter scale, growing slowly as in a float32 run that stays together.
ROUNDING = [1e-7 * (1 + t / 10) for t in range(STEPS)]


def _curve(values):
    return {"w": list(values)}


def test_the_null_is_the_smaller_backends_so_a_defect_in_one_cannot_raise_its_own_allowance():
    """A backend whose 2-device path is off parts from itself by the defect; the other backend's own divergence is
    what both are judged against."""
    defect = [1e-3] * STEPS
    null = reference_null({"tensorflow": [_curve(ROUNDING)], "aesara": [_curve(defect)]})
    assert null == _curve(ROUNDING)
    verdict = judge_parity("float32", _curve(defect), null, 1.0)
    assert not verdict.passed and verdict.beyond[0][:2] == (1, "w") and verdict.split is None
    # The old rule, the largest backend's divergence, would have allowed ten times the defect:
    assert max(defect) < NULL_FACTOR * max(reference_null({"aesara": [_curve(defect)]})["w"])


def test_each_backend_takes_the_largest_of_its_own_pairs():
    null = reference_null({"a": [_curve([1.0, 1.0]), _curve([2.0, 0.5])], "b": [_curve([3.0, 3.0])], "c": []})
    assert null == _curve([2.0, 1.0])
    assert reference_null({"a": [], "b": []}) is None


def test_rounding_level_runs_pass_with_every_step_judged():
    verdict = judge_parity("float32", _curve([2 * r for r in ROUNDING]), _curve(ROUNDING), 1.0)
    assert verdict.passed and verdict.judged == {"w": STEPS} and verdict.split is None


def test_a_jump_from_within_the_bound_is_a_split_judged_up_to_and_reported():
    """Rounding crossing a ReLU boundary: one run leaves the others in one step, by far more than the bound."""
    gaps = ROUNDING[:12] + [1e-3] * (STEPS - 12)
    verdict = judge_parity("float32", _curve(gaps), _curve(ROUNDING), 1.0)
    assert verdict.passed and verdict.split == 13 and verdict.jumped == ("w",) and verdict.judged == {"w": 12}
    # A jump that lands just inside the bound and passes it a step later (measured on the digits conv net):
    bound = _bound(ROUNDING[12], 12)
    gaps = ROUNDING[:12] + [0.6 * bound] + [1e-3] * (STEPS - 13)
    verdict = judge_parity("float32", {"w": gaps, "b": ROUNDING}, {"w": ROUNDING, "b": ROUNDING}, 1.0)
    assert verdict.passed and verdict.split == 13 and verdict.judged == {"w": 12, "b": 12}


def test_a_difference_at_step_1_fails_however_large_the_jump():
    """The runs start equal: nothing before step 1 could have grown, so step 1 is never a split."""
    verdict = judge_parity("float32", _curve([1e-3] * STEPS), _curve(ROUNDING), 1.0)
    assert not verdict.passed and verdict.split is None and verdict.beyond[0][0] == 1


def _bound(null, t):
    return NULL_FACTOR * null + FLOAT32_RTOL + FLOAT32_DRIFT * (t + 1)


def test_a_difference_that_grows_past_the_bound_without_a_jump_fails():
    growing = [1e-7 * 1.5 ** t for t in range(STEPS)]  # by 1.5 a step
    assert 1.5 < JUMP_FACTOR
    verdict = judge_parity("float32", _curve(growing), _curve(ROUNDING), 1.0)
    assert not verdict.passed and verdict.split is None
    expected = next(t + 1 for t in range(STEPS) if growing[t] > _bound(ROUNDING[t], t))
    assert verdict.beyond[0][:2] == (expected, "w") and expected > 1


def test_float32_allows_a_steady_drift_of_the_frameworks_elementwise_rounding_and_no_more():
    """tanh or exp one ulp apart in the two frameworks: a divergence that no reordering within a backend shows."""
    none = [0.0] * STEPS
    within = [FLOAT32_RTOL + 0.5 * FLOAT32_DRIFT * (t + 1) for t in range(STEPS)]
    assert judge_parity("float32", _curve(within), _curve(none), 1.0).passed
    beyond = [FLOAT32_RTOL + 2 * FLOAT32_DRIFT * (t + 1) for t in range(STEPS)]
    assert judge_parity("float32", _curve(beyond), _curve(none), 1.0).beyond[0][0] == 1


def test_a_parameter_that_rounding_alone_parts_is_judged_only_until_then():
    """A parameter with no gradient in exact arithmetic is moved by rounding noise: every backend parts from itself
    in it past SPLIT_BOUND from step 1, and no bound can judge it; the others are judged at every step."""
    noise = [10 * SPLIT_BOUND] * STEPS
    gaps = {"w": ROUNDING, "key_bias": [1.0] * STEPS}
    verdict = judge_parity("float32", gaps, {"w": ROUNDING, "key_bias": noise}, 1.0)
    assert verdict.passed and verdict.judged == {"w": STEPS, "key_bias": 0}
    nothing = judge_parity("float32", {"key_bias": [1.0] * STEPS}, {"key_bias": noise}, 1.0)
    assert not nothing.passed and not nothing.beyond  # a check that judged nothing does not pass


def test_float64_without_a_null_is_judged_against_its_fixed_floor_and_float32_is_refused():
    assert judge_parity("float64", _curve([1e-12] * 3), None, 1.0).passed
    assert not judge_parity("float64", _curve([1e-9] * 3), None, 1.0).passed
    with pytest.raises(ArgumentError, match="at least two device counts"):
        judge_parity("float32", _curve(ROUNDING), None, 1.0)
    with pytest.raises(ArgumentError, match="the null has 1 step"):
        judge_parity("float32", _curve(ROUNDING), _curve(ROUNDING[:1]), 1.0)


def test_perturbations_parse_and_name_what_they_refuse():
    assert parse_perturbation("aesara:1e-3:2,4", ["tensorflow", "aesara"], [1, 2, 4]) == \
        Perturbation("aesara", 1e-3, (2, 4))
    every = parse_perturbation("tensorflow:-1e-4", ["tensorflow", "aesara"], [1, 2])
    assert every.applies("tensorflow", 1) and every.applies("tensorflow", 2) and not every.applies("aesara", 1)
    assert "1 + -0.0001 on every device count" in str(every)
    for text, words in [("aesara", "BACKEND:SCALE[:DEVICES]"), ("aesara:big", "SCALE must be a number"),
                        ("aesara:0", "non-zero"), ("aesara:nan", "finite"), ("aesara:-2", "above -1"),
                        ("torch:1e-3", "backend 'torch' is not run"), ("aesara:1e-3:8", "device count(s) [8]")]:
        with pytest.raises(ArgumentError, match=words.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
            parse_perturbation(text, ["tensorflow", "aesara"], [1, 2])


def test_a_jump_from_equal_runs_is_a_difference_not_a_split():
    """Rounding amplifies a difference that exists; two runs still bit-identical after a step have none to grow."""
    verdict = judge_parity("float64", _curve([0.0, 0.0, 1e-6, 1e-6]), _curve([0.0] * 4), 1.0)
    assert not verdict.passed and verdict.split is None and verdict.beyond[0][0] == 3


def test_a_jump_in_the_first_steps_is_a_difference_not_a_split():
    """Adam's first update is about lr * sign(g), which hides a difference in the math until step 2, where it
    appears as a jump; rounding has not had the steps to grow into a split by then."""
    gaps = [1e-7, 1e-3] + [1e-3] * (STEPS - 2)
    verdict = judge_parity("float32", _curve(gaps), _curve(ROUNDING), 1.0)
    assert not verdict.passed and verdict.split is None and verdict.beyond[0][0] == 2


def test_the_null_is_raised_to_the_first_steps_float32_rounding():
    """The Transformer's position embeddings (seed 7): 2.5e-5 apart after Adam's first update, which turns the
    frameworks' rounding of a gradient entry near zero into a difference no reordering within a backend shows
    (null 2.8e-7); each backend's float32 first step is 5.5e-6 (TensorFlow) and 3.0e-5 (Aesara) from float64 there,
    and the smaller raises the null."""
    gaps, null = _curve([2.46e-5] * STEPS), _curve([2.8e-7] * STEPS)
    assert not judge_parity("float32", gaps, null, 1.0).passed
    assert judge_parity("float32", gaps, null, 1.0, rounding={"w": 5.5e-6}).passed
    # A defect confined to one backend does not raise the other's rounding: 1e-3 apart still fails at step 1.
    assert judge_parity("float32", _curve([1e-3] * STEPS), null, 1.0, {"w": 5.5e-6}).beyond[0][0] == 1


def test_a_run_that_turns_non_finite_fails_however_its_null_looks():
    """NaN compares false with everything: a NaN divergence (or a NaN null) must count as past the bound."""
    nan, inf = float("nan"), float("inf")
    gaps = ROUNDING[:5] + [nan] * (STEPS - 5)
    verdict = judge_parity("float32", _curve(gaps), _curve(ROUNDING), 1.0)
    assert not verdict.passed and verdict.beyond[0][0] == 6 and verdict.split is None
    assert not judge_parity("float32", _curve(ROUNDING), _curve([nan] * STEPS), 1.0).passed
    assert not judge_parity("float64", _curve([0.0, inf]), None, 1.0).passed


def test_a_loss_that_cannot_be_judged_leaves_the_verdict_to_the_parameters():
    """Per-device batch statistics (the ResNet's batch normalization) make each device count compute another loss:
    the backends' own loss differences are not rounding, past SPLIT_BOUND from step 1, and the loss judges nothing;
    the parameters that can be judged still decide, and a check that judged neither fails."""
    from toolkit.command.parity import Judged

    unjudged = judge_parity("float32", {"loss": [1e-3] * STEPS}, {"loss": [1e-3] * STEPS}, 1.0)
    judged = judge_parity("float32", _curve(ROUNDING), _curve(ROUNDING), 1.0)
    nothing = judge_parity("float32", {"key_bias": [1.0] * STEPS}, {"key_bias": [10 * SPLIT_BOUND] * STEPS}, 1.0)
    assert not unjudged.passed and not unjudged.beyond
    assert Judged(judged, unjudged, {}, {}, None, None).passed
    assert not Judged(nothing, unjudged, {}, {}, None, None).passed
    beyond = judge_parity("float32", _curve([1e-3] * STEPS), _curve(ROUNDING), 1.0)
    assert not Judged(beyond, unjudged, {}, {}, None, None).passed
