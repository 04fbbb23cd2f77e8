"""The engine proposer (:mod:`sgs.search.engine_proposer`) on scripted completions:
the prompt its reader renders, how the reader cuts, deduplicates and ranks
the completions, and what the proposer counts; and the search's config node
against ``SearchSettings``."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from sgs.config.evaluation import SearchStrategy, SolverSearchConfig
from sgs.method.roles import PromptSet
from sgs.prover.examples import tactic_example
from sgs.prover.steps import StepExample
from sgs.search.engine_proposer import EngineProposer, TacticAnswer, TacticReader, tactic_logprob
from sgs.search.languages import TACTIC_LANGUAGES
from sgs.search.proposers import Proposal
from sgs.search.settings import SearchSettings
from sgs.search.strategies import STRATEGIES

STATE = "n : nat\n============================\nn + 0 = n"


class PieceTokenizer:
    """Token i is the text ``PIECES[i]``; 0 is the end of sequence.  No chat
    template, so a prompt is the rendered role text itself."""

    PIECES = ["</s>", "intros", ".", "simpl", " n", "lia", " ", "(*", "*)", "\n", "omega", "simp"]

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


@dataclass(frozen=True)
class Completion:
    """A sampled completion as an engine returns one."""

    text: str
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]


def completion(text: str, logprobs: list[float], eos: bool = True) -> Completion:
    ids = TOKENIZER.encode(text) + ([0] if eos else [])
    assert len(ids) == len(logprobs), (text, ids)
    return Completion(TOKENIZER.decode(ids, skip_special_tokens=True), tuple(ids), tuple(logprobs))


READER = TacticReader(TOKENIZER)


def test_the_prompt_is_the_tactic_prompt_the_model_was_trained_on():
    step = StepExample(state=STATE, tactic="lia.", lemmas=(), library="l", file="f", theorem="t", index=0,
                       split="train")
    assert READER.prompt(STATE) == tactic_example(step, PromptSet("rocq")).prompt


def test_tactics_are_ranked_by_their_log_probabilities_and_deduplicated():
    answer = READER.answer([
        completion("intros.", [-2.0, -0.5, -0.1]),          # first drawn, but the least likely
        completion("lia.", [-0.2, -0.1, -0.1]),
        completion("intros.", [-2.0, -0.5, -0.1]),          # the same tactic again: one proposal
        completion("simpl n.", [-1.0, -0.5, -0.5], eos=False),
    ])
    # A tactic's log-probability stops at its last character: the end-of-sequence token is not in it.
    assert [(p.tactic, p.logprob) for p in answer.proposals] == [
        ("lia.", pytest.approx(-0.3)), ("simpl n.", pytest.approx(-2.0)), ("intros.", pytest.approx(-2.5))]
    assert (answer.samples, answer.tokens) == (4, 3 + 3 + 3 + 3)


def test_a_completion_that_runs_on_is_cut_at_its_first_sentence():
    long = completion("intros. lia.", [-0.1, -0.2, -4.0, -4.0, -4.0, -1.0])
    assert long.text == "intros. lia."
    answer = READER.answer([long, completion("", [-0.1])])
    assert [(p.tactic, p.logprob) for p in answer.proposals] == [("intros.", pytest.approx(-0.3))]
    # Every sampled token is a generated token, those after the cut too (and an empty answer's).
    assert (answer.samples, answer.tokens) == (2, 7)
    # A period inside a comment ends no sentence.
    commented = completion("lia (*.*).", [-0.1, -0.1, -0.1, -0.1, -0.1, -0.1, -0.1])
    assert tactic_logprob(TOKENIZER, commented, "lia (*.*).") == pytest.approx(-0.6)


def test_a_lean_reader_asks_in_leans_template_and_cuts_a_completion_at_its_first_line():
    lean = TacticReader(TOKENIZER, "lean")
    assert lean.prompt("n : Nat\n⊢ n + 0 = n") == PromptSet("lean").tactic("n : Nat\n⊢ n + 0 = n")
    assert "Lean 4 proof state:" in lean.prompt("⊢ True")
    # Lean tactics end at the line, not at a period: "simp" then "omega" is two steps.
    answer = lean.answer([completion("\nsimp\nomega", [-0.5, -0.25, -3.0, -3.0, -1.0]),
                          completion("omega", [-0.5, -0.1])])
    assert [(p.tactic, p.logprob) for p in answer.proposals] == [("omega", pytest.approx(-0.5)),
                                                                 ("simp", pytest.approx(-0.75))]


def test_a_reader_for_a_language_the_search_does_not_know_is_refused():
    with pytest.raises(ValueError, match="the search knows no proof language 'isabelle'; choose one of rocq, lean"):
        TacticReader(TOKENIZER, "isabelle")


def test_the_proposer_makes_one_call_per_state_and_counts_what_it_cost():
    asked = []

    def draw(state: str, n: int) -> TacticAnswer:
        asked.append((state, n))
        return TacticAnswer((Proposal("lia.", -0.3), Proposal("auto.", -1.0)), samples=n, tokens=5 * n)

    proposer = EngineProposer(draw)
    assert [p.tactic for p in proposer.propose(STATE, 4)] == ["lia.", "auto."]
    assert proposer.propose(STATE, 0) == []          # width 0: the finishers alone, no call
    proposer.propose("other", 2)
    assert asked == [(STATE, 4), ("other", 2)]
    assert proposer.counts() == {"model_calls": 2, "samples": 6, "tokens": 30}


def test_the_search_config_node_mirrors_the_search_settings():
    node, settings = SolverSearchConfig(), SearchSettings()
    assert set(SearchStrategy) == set(STRATEGIES)
    assert (node.width, node.max_depth, node.tactic_seconds) == (
        settings.width, settings.max_depth, settings.tactic_seconds)
    assert node.finishers is None and settings.finishers == TACTIC_LANGUAGES["rocq"].finishers
