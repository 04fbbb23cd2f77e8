"""The whole-proof sampling arm's loop (sgs.prover.sampling), on a scripted model, checker and clock."""

from lean_env.verdict import ProofTask, Status, Verdict
from sgs.prover.sampling import Draw, SamplingPlan, sample_until_proved

TASK = ProofTask(id="t", header="", statement="Lemma t : True.", proof="")


def answer(body: str) -> str:
    return f"```coq\nLemma t : True.\nProof.\n  {body}\nQed.\n```"


class Clock:
    """Time moves only when the fakes say so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def scripted(rounds, clock, draw_seconds):
    rounds = list(rounds)

    def draw(task, n):
        clock.now += draw_seconds
        outputs = rounds.pop(0) if rounds else ()
        return Draw(tuple(outputs), tokens=10 * len(outputs))
    return draw


def checker(clock, valid_body, check_seconds, seen):
    def check(task, timeout):
        seen.append((task.proof, timeout))
        clock.now += check_seconds
        ok = valid_body in task.proof
        return Verdict(Status.VALID if ok else Status.INVALID, "ok" if ok else "prover_error")
    return check


def test_stops_at_the_first_valid_proof_and_counts_what_it_drew():
    clock, checked = Clock(), []
    draw = scripted([[answer("auto."), "no block", answer("auto.")], [answer("exact I."), answer("trivial.")]],
                    clock, draw_seconds=2.0)
    result = sample_until_proved(TASK, draw, checker(clock, "exact I.", 1.0, checked), SamplingPlan(60.0, 3),
                                 clock=clock)
    assert result["proved"] and result["stop"] == "proved"
    assert result["proof"] == "Proof.\n  exact I.\nQed."
    # the repeated auto. is checked once; trivial. is never checked (the round ended at the valid proof)
    assert [proof for proof, _ in checked] == ["Proof.\n  auto.\nQed.", "Proof.\n  exact I.\nQed."]
    stats = result["stats"]
    assert (stats["rounds"], stats["samples"], stats["no_proof"], stats["repeated"], stats["checked"]) == (2, 5, 1, 1, 2)
    assert stats["model_seconds"] == 4.0 and stats["check_seconds"] == 2.0 and stats["seconds"] == 6.0
    assert result["generation"] == {"model_calls": 2, "samples": 5, "tokens": 50}


def test_the_budget_covers_generation_and_checking_and_the_last_check_gets_what_is_left():
    clock, checked = Clock(), []
    draw = scripted([[answer(f"tac{i}.") for i in range(4)]] * 3, clock, draw_seconds=4.0)
    plan = SamplingPlan(seconds=10.0, samples_per_round=4, check_seconds=3.0)
    result = sample_until_proved(TASK, draw, checker(clock, "never", 3.0, checked), plan, clock=clock)
    assert not result["proved"] and result["stop"] == "time" and result["verdict"] is None
    # 4 s drawing, then two checks of 3 s; the third proof finds no time left
    assert [timeout for _, timeout in checked] == [3.0, 3.0]
    assert result["stats"]["rounds"] == 1 and result["stats"]["seconds"] == 10.0


def test_a_proof_naming_a_forbidden_lemma_is_never_checked():
    clock, checked = Clock(), []
    draw = scripted([[answer("apply t."), answer("apply Coq.Init.t."), answer("exact I.")]], clock, draw_seconds=1.0)
    result = sample_until_proved(TASK, draw, checker(clock, "exact I.", 1.0, checked), SamplingPlan(60.0, 3),
                                 forbidden=frozenset({"t"}), clock=clock)
    assert result["proved"] and result["stats"]["forbidden"] == 2
    assert [proof for proof, _ in checked] == ["Proof.\n  exact I.\nQed."]


def test_a_model_that_writes_no_proof_uses_the_budget_and_proves_nothing():
    clock, checked = Clock(), []
    draw = scripted([["nothing"]] * 100, clock, draw_seconds=5.0)
    result = sample_until_proved(TASK, draw, checker(clock, "x", 1.0, checked), SamplingPlan(20.0, 1), clock=clock)
    assert not result["proved"] and checked == []
    assert result["stats"]["rounds"] == 4 and result["stats"]["no_proof"] == 4
