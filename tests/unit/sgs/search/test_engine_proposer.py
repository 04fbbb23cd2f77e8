"""The engine proposer (:mod:`sgs.search.engine_proposer`) on a scripted engine:
the prompt it sends, how it cuts, deduplicates and ranks the completions, and
what it counts; and the search's config node against ``SearchSettings``."""

from __future__ import annotations

import pytest

from sgs.config.evaluation import SearchStrategy, SolverSearchConfig
from sgs.method.roles import PromptSet
from sgs.prover.examples import tactic_example
from sgs.prover.steps import StepExample
from sgs.search.engine_proposer import Completion, EngineProposer, tactic_logprob
from sgs.search.settings import SearchSettings
from sgs.search.strategies import STRATEGIES

STATE = "n : nat\n============================\nn + 0 = n"


class PieceTokenizer:
    """Token i is the text ``PIECES[i]``; 0 is the end of sequence.  No chat
    template, so a prompt is the rendered role text itself."""

    PIECES = ["</s>", "intros", ".", "simpl", " n", "lia", " ", "(*", "*)"]

    def encode(self, text: str) -> list[int]:
        ids, rest = [], text
        while rest:
            # the longest piece that starts the rest: enough for the scripted texts
            index = max((i for i, p in enumerate(self.PIECES) if i and rest.startswith(p)),
                        key=lambda i: len(self.PIECES[i]))
            ids.append(index)
            rest = rest[len(self.PIECES[index]):]
        return ids

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return "".join(self.PIECES[i] for i in ids if i or not skip_special_tokens)


TOKENIZER = PieceTokenizer()


def completion(text: str, logprobs: list[float], eos: bool = True) -> Completion:
    ids = TOKENIZER.encode(text) + ([0] if eos else [])
    assert len(ids) == len(logprobs), (text, ids)
    return Completion(TOKENIZER.decode(ids, skip_special_tokens=True), tuple(ids), tuple(logprobs))


class ScriptedEngine:
    """``draw(prompt, n)``: the next scripted list of completions; keeps the prompts it got."""

    def __init__(self, *answers: list[Completion]) -> None:
        self.answers = list(answers)
        self.prompts: list[tuple[str, int]] = []

    def __call__(self, prompt: str, n: int) -> list[Completion]:
        self.prompts.append((prompt, n))
        return self.answers.pop(0)


def test_the_prompt_is_the_tactic_prompt_the_model_was_trained_on():
    engine = ScriptedEngine([])
    EngineProposer(engine, TOKENIZER).propose(STATE, 4)
    step = StepExample(state=STATE, tactic="lia.", lemmas=(), library="l", file="f", theorem="t", index=0,
                       split="train")
    assert engine.prompts == [(tactic_example(step, PromptSet("rocq")).prompt, 4)]


def test_tactics_are_ranked_by_their_log_probabilities_and_deduplicated():
    engine = ScriptedEngine([
        completion("intros.", [-2.0, -0.5, -0.1]),          # first drawn, but the least likely
        completion("lia.", [-0.2, -0.1, -0.1]),
        completion("intros.", [-2.0, -0.5, -0.1]),          # the same tactic again: one proposal
        completion("simpl n.", [-1.0, -0.5, -0.5], eos=False),
    ])
    proposer = EngineProposer(engine, TOKENIZER)
    proposals = proposer.propose(STATE, 4)
    # A tactic's log-probability stops at its last character: the end-of-sequence token is not in it.
    assert [(p.tactic, p.logprob) for p in proposals] == [
        ("lia.", pytest.approx(-0.3)), ("simpl n.", pytest.approx(-2.0)), ("intros.", pytest.approx(-2.5))]
    assert proposer.counts() == {"model_calls": 1, "samples": 4, "tokens": 3 + 3 + 3 + 3}


def test_a_completion_that_runs_on_is_cut_at_its_first_sentence():
    long = completion("intros. lia.", [-0.1, -0.2, -4.0, -4.0, -4.0, -1.0])
    assert long.text == "intros. lia."
    proposer = EngineProposer(ScriptedEngine([long]), TOKENIZER)
    [proposal] = proposer.propose(STATE, 1)
    assert (proposal.tactic, proposal.logprob) == ("intros.", pytest.approx(-0.3))
    # Every sampled token is a generated token, those after the cut too.
    assert proposer.counts()["tokens"] == 6
    # A period inside a comment ends no sentence.
    commented = completion("lia (*.*).", [-0.1, -0.1, -0.1, -0.1, -0.1, -0.1, -0.1])
    assert tactic_logprob(TOKENIZER, commented, "lia (*.*).") == pytest.approx(-0.6)


def test_empty_answers_cost_a_call_and_propose_nothing():
    proposer = EngineProposer(ScriptedEngine([completion("", [-0.1])], []), TOKENIZER)
    assert proposer.propose(STATE, 2) == [] and proposer.propose(STATE, 2) == []
    assert proposer.counts() == {"model_calls": 2, "samples": 1, "tokens": 1}
    assert EngineProposer(ScriptedEngine(), TOKENIZER).propose(STATE, 0) == []   # width 0: no call


def test_the_search_config_node_mirrors_the_search_settings():
    node, settings = SolverSearchConfig(), SearchSettings()
    assert set(SearchStrategy) == set(STRATEGIES)
    assert (node.width, node.max_depth, node.tactic_seconds, tuple(node.finishers)) == (
        settings.width, settings.max_depth, settings.tactic_seconds, settings.finishers)
