"""Constrained decoding: the built-in Rocq statement grammar (its sentences
elaborate in real Rocq: ``tests/integration/sgs/test_grammar_rocq.py``; its
non-sentences are what fails elaboration), the grammar setting, and the
transformers engine sampling under a grammar."""

from __future__ import annotations

import pytest
import xgrammar
from transformers import AutoTokenizer

from sgs.machinery.engines import SamplingSettings
from sgs.machinery.engines.hf import TransformersEngine
from sgs.machinery.runtime import grammar_text
from sgs.method.roles.grammar import ROCQ_BINDERS, rocq_statement_grammar

#: Between them, every construct of the grammar and several binder lists.
SENTENCES = [
    "Nat.gcd 35 64 = 1",
    "rev [3; 1; 4] = [4; 1; 3]",
    "length (@nil nat) = 0",
    "Nat.Even 4 /\\ Nat.Odd 3",
    "Nat.divide 3 12",
    "In 2 [1; 2; 3]",
    "fact 3 = 6",
    "Nat.max 2 5 - Nat.min 2 5 = 3",
    "2 ^ 3 > 7",
    "list_sum (seq 1 3) = 6",
    "list_max (repeat 4 2) >= 4",
    "firstn 2 (skipn 1 [1; 2; 3]) = [2; 3]",
    "map S (0 :: (@nil nat)) = [1]",
    "(2 =? 2) = true",
    "negb (Nat.even 3) = Nat.odd 3",
    "(1 <=? 0) || false = false && true",
    "pred 1 <> 1 \\/ 1 < 0",
    "~ 1 = 2 -> (1 <= 2)",
    "forall n m : nat, n + m = m + n",
    "forall x y z : nat, x * (y + z) = x * y + x * z",
    "forall (x : nat) (l : list nat), In x (x :: l)",
    "forall (l : list nat) (a : nat), In a l -> 0 < length l",
    "forall l1 l2 : list nat, rev (l1 ++ l2) = rev l2 ++ rev l1",
    "forall (f : nat -> nat) (l : list nat), length (map f l) = length l",
    "forall f g : nat -> nat, f (g 0) = f (g 0)",
    "forall a b c : bool, a && (b || c) = a && b || a && c",
    "forall P Q R : Prop, (P -> Q) -> (Q -> R) -> P -> R",
]

#: What the grammar leaves out: the failures it exists to prevent, and syntax outside it.
NON_SENTENCES = [
    "forall n : nat, m + 0 = n",  # unbound name
    "forall b : nat, f b = b",  # unbound function
    "forall n : nat, n + true = n",  # type error
    "rev [] = []",  # element type left to inference
    "forall n : nat,n = n",  # spacing other than the corpus's
    "exists n : nat, n = 1",  # outside the fragment
    "negb negb true = true",  # a function applied to a function
    "S S 0 = 2",
    "forall n : nat, n + 0 = n /\\",  # unfinished
]


def wrap(statement: str) -> str:
    return f"```coq\nTheorem t : {statement}.\nAdmitted.\n```"


@pytest.fixture(scope="module")
def tokenizer(checkpoint):
    return AutoTokenizer.from_pretrained(checkpoint)


@pytest.fixture(scope="module")
def compiled(tokenizer):
    info = xgrammar.TokenizerInfo.from_huggingface(tokenizer, stop_token_ids=[tokenizer.eos_token_id])
    return xgrammar.GrammarCompiler(info).compile_grammar(rocq_statement_grammar())


def accepts(compiled, tokenizer, text: str) -> bool:
    """Whether ``text`` followed by EOS is a complete sentence of the grammar."""
    matcher = xgrammar.GrammarMatcher(compiled)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return all(matcher.accept_token(i) for i in ids) and matcher.is_terminated()


@pytest.mark.parametrize("statement", SENTENCES)
def test_the_grammar_accepts_statements_of_its_fragment(compiled, tokenizer, statement):
    assert accepts(compiled, tokenizer, wrap(statement))


@pytest.mark.parametrize("statement", NON_SENTENCES)
def test_the_grammar_refuses_free_names_type_errors_and_other_syntax(compiled, tokenizer, statement):
    assert not accepts(compiled, tokenizer, wrap(statement))


def test_each_binder_list_binds_exactly_its_names():
    grammar = rocq_statement_grammar()
    texts = [b.text() for b in ROCQ_BINDERS]
    assert len(set(texts)) == len(texts)
    assert "forall (f : nat -> nat) (l : list nat), " in texts and "forall n m : nat, " in texts
    # The copy of the nat atoms for `forall n m : nat` offers n and m and no other name.
    index = texts.index("forall n m : nat, ")
    line = next(line for line in grammar.splitlines() if line.startswith(f"nat_atom_{index} ::="))
    assert line == f'nat_atom_{index} ::= numeral | "n" | "m" | "(" nat_{index} ")"'


def test_the_grammar_setting_names_a_builtin_or_a_file(tmp_path):
    assert grammar_text(None, "rocq") is None
    assert grammar_text("statement", "rocq") == rocq_statement_grammar()
    assert grammar_text("statement", "lean") is None  # no built-in Lean grammar: free text
    own = tmp_path / "own.ebnf"
    own.write_text('root ::= "```coq\\nTheorem t : True.\\nAdmitted.\\n```"\n')
    assert grammar_text(str(own), "rocq") == own.read_text()
    with pytest.raises(ValueError, match="cannot be read"):
        grammar_text(str(tmp_path / "missing.ebnf"), "rocq")
    (tmp_path / "empty.ebnf").write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        grammar_text(str(tmp_path / "empty.ebnf"), "rocq")


# --------------------------------------------------------------------------
# Sampling under a grammar (the transformers engine; vLLM's is in test_engines_vllm)
# --------------------------------------------------------------------------

#: Small enough for the random test model to finish within its context.
SMALL = 'root ::= "n + " [0-9] " = " ("n" | [1-9] [0-9]?)'


def test_grammar_constrained_samples_follow_it_and_report_the_sampled_distribution(checkpoint):
    engine = TransformersEngine(checkpoint, device="cpu")
    settings = SamplingSettings(n=8, max_tokens=40, temperature=1.0, seed=3, grammar=SMALL)
    samples = [s for group in engine.generate(["Theorem", "Lemma x"], settings) for s in group]
    compiled = xgrammar.GrammarCompiler(xgrammar.TokenizerInfo.from_huggingface(
        engine.tokenizer, vocab_size=engine.model.config.vocab_size,
        stop_token_ids=[engine.tokenizer.eos_token_id])).compile_grammar(SMALL)
    for sample in samples:
        # Every sample is a whole sentence (then EOS): the random model alone would never write one.
        assert sample.finish_reason == "stop", sample.text
        matcher = xgrammar.GrammarMatcher(compiled)
        assert all(matcher.accept_token(t) for t in sample.token_ids) and matcher.is_terminated()
        assert sample.text.startswith("n + ") and " = " in sample.text
        # Renormalised over the allowed tokens: at least the unconstrained log-prob,
        # and exactly 0 where the grammar allowed one token only (the literal's tokens).
        free = engine.logprobs_of(sample.prompt_token_ids, sample.token_ids)
        assert all(c >= f - 1e-5 for c, f in zip(sample.logprobs, free))
        assert sample.logprobs[0] == pytest.approx(0.0, abs=1e-6)
        assert sample.entropy == sample.entropy  # not nan: forbidden tokens add no entropy
    # Greedy decoding under a grammar also stays inside it.
    greedy = engine.generate(["Theorem"], SamplingSettings(max_tokens=40, temperature=0.0, grammar=SMALL))[0][0]
    assert greedy.finish_reason == "stop" and greedy.text.startswith("n + ")


def test_a_grammar_that_does_not_compile_is_named(checkpoint):
    engine = TransformersEngine(checkpoint, device="cpu")
    with pytest.raises(ValueError, match="does not compile"):
        engine.generate(["Theorem"], SamplingSettings(max_tokens=4, grammar="root ::= undefined_rule"))
