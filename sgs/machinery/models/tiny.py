"""A tiny Llama and its tokenizer, built locally with no download.

The tiny model stands in for DeepSeek-Prover-V2-7B wherever the real model
cannot run (laptops, CI): same Hugging Face format, same loading path
(:func:`load_model_and_tokenizer`), same chat-template interface, but under a
million random weights.  It proves nothing at first; it exists so
the whole loop (sampling, verification, training, weight reload) runs end to
end on a CPU.

The tokenizer is a byte-level BPE trained on the caller's text (for example
the Rocq targets) plus :data:`BUILTIN_CORPUS`, so any Unicode text
round-trips exactly.  A build is cached: the output directory records a
fingerprint of the settings, the seed and the corpus, and a second build
with the same inputs returns the directory untouched.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sgs.config import TinyModelSettings

__all__ = [
    "BUILTIN_CORPUS",
    "CHAT_TEMPLATE",
    "BUILD_INFO_FILE",
    "TinyModelSettings",
    "build_fingerprint",
    "build_tiny_model",
    "load_model_and_tokenizer",
]

BOS_TOKEN = "<s>"
EOS_TOKEN = "</s>"
PAD_TOKEN = "<pad>"
#: Role markers of the chat template, one token each.
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
SPECIAL_TOKENS = (BOS_TOKEN, EOS_TOKEN, PAD_TOKEN, *ROLE_TOKENS)

#: Each message is its role marker, a newline, the content and EOS; a
#: generation prompt opens an assistant turn, so the model stops at EOS.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('unknown chat role: ' + message['role']) }}"
    "{% endif %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}{{ eos_token }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

#: Written last into a finished build; holds the fingerprint and the inputs.
BUILD_INFO_FILE = "sgs_tiny_build.json"
#: Bump when the build procedure changes, so old caches are rebuilt.
BUILDER_VERSION = 1

#: Text every tokenizer is trained on, whatever the caller passes: the
#: vocabulary of Rocq and Lean statements and proofs, and of the role prompts.
BUILTIN_CORPUS: tuple[str, ...] = (
    # Rocq
    "Theorem add_zero_right : forall n : nat, n + 0 = n.\n"
    "Proof.\n  intros n. induction n as [| k IH].\n  - reflexivity.\n  - simpl. rewrite IH. reflexivity.\nQed.",
    "Lemma le_succ_both : forall a b : nat, a <= b -> S a <= S b.\n"
    "Proof.\n  intros a b H. apply le_n_S. exact H.\nQed.",
    "Theorem and_swap : forall P Q : Prop, P /\\ Q -> Q /\\ P.\n"
    "Proof.\n  intros P Q [HP HQ]. split; assumption.\nQed.",
    "Lemma or_comm_left : forall A B : Prop, A \\/ B -> B \\/ A.\n"
    "Proof.\n  intros A B [HA | HB].\n  - right. exact HA.\n  - left. exact HB.\nQed.",
    "Theorem mul_two_double (m : nat) : 2 * m = m + m.\nProof. lia. Qed.",
    "Lemma rev_length_same : forall (X : Type) (l : list X), length (rev l) = length l.\n"
    "Proof.\n  intros X l. induction l as [| x xs IH]; simpl.\n  - reflexivity.\n"
    "  - rewrite app_length, IH. simpl. lia.\nQed.",
    "Require Import Arith Lia List ZArith Bool.\nImport ListNotations.\nOpen Scope nat_scope.",
    "Proof. intros. destruct H as [x Hx]. exists x. auto. Qed.",
    "Proof. unfold not. intros H. inversion H. Qed.",
    "Proof. intros. apply Nat.le_trans with (m := b); assumption. Qed.",
    "Proof. intros x y. rewrite Nat.add_comm. symmetry. reflexivity. Qed.",
    "Proof. induction n; simpl; auto. Qed.",
    "Proof. intros. subst. constructor. Qed.",
    "Proof. intros. exfalso. apply H. eauto. Qed.",
    "Proof. intros. specialize (H 0). discriminate. Qed.",
    "Proof. repeat split; try lia. Qed.",
    "Proof. intros. replace (a * 1) with a by ring. trivial. Qed.",
    "Definition double (n : nat) : nat := n + n.\n"
    "Fixpoint sum_to (n : nat) : nat := match n with | O => O | S k => S k + sum_to k end.",
    "Example two_plus_two : 2 + 2 = 4. Proof. reflexivity. Qed.",
    "Corollary zero_le_any : forall n, 0 <= n. Proof. intros. apply Nat.le_0_l. Qed.",
    "Print Assumptions add_zero_right.",
    # Lean 4
    "import Mathlib\nimport Aesop\nset_option maxHeartbeats 0\nopen BigOperators Real Nat Topology Rat",
    "theorem add_zero_right (n : ℕ) : n + 0 = n := by\n  simp",
    "theorem sq_nonneg_add (a b : ℝ) : 0 ≤ a ^ 2 + b ^ 2 := by\n  positivity",
    "theorem mul_comm_example (x y : ℤ) : x * y = y * x := by\n  ring",
    "theorem lt_of_succ_le' {m n : ℕ} (h : m + 1 ≤ n) : m < n := by\n  omega",
    "theorem exists_double (k : ℕ) : ∃ m, m = 2 * k := by\n  exact ⟨2 * k, rfl⟩",
    "theorem abs_sub_example (a b : ℝ) (h₀ : a ≤ b) : |b - a| = b - a := by\n"
    "  rw [abs_of_nonneg]\n  linarith",
    "theorem forall_mem_example (s : Finset ℕ) : ∑ i in s, (0 : ℕ) = 0 := by\n  simp",
    "  intro h\n  induction n with\n  | zero => simp\n  | succ k ih =>\n    simp [ih]\n    nlinarith [sq_nonneg (k : ℝ)]",
    "  constructor\n  · norm_num\n  · field_simp\n    ring_nf",
    "  rcases h with ⟨x, hx⟩\n  refine ⟨x + 1, ?_⟩\n  linarith",
    "  have h₁ : 0 < x := by linarith\n  nlinarith [h₁, sq_nonneg (x - 1)]",
    "  apply le_antisymm <;> decide",
    "  unfold f at h\n  simp only [mul_add] at h ⊢\n  exact h",
    "theorem conjecture_placeholder (x : ℝ) (h : 0 < x) : 0 < x ^ 3 := by sorry",
    "#print axioms add_zero_right",
    # Role prompts and answers
    "Complete the following proof. Write the whole theorem and its proof in one code block.",
    "```lean4\ntheorem t : True := by\n  trivial\n```",
    "```coq\nTheorem t : True.\nProof. exact I. Qed.\n```",
    "Here is a target theorem that has not been proved yet. State one simpler lemma that would "
    "help to prove it. The lemma must not be the target itself, even with the names changed.",
    "State a non-trivial theorem of moderate difficulty from a randomly chosen area of mathematics.",
    "Review the proposed lemma for the target theorem and give three scores.",
    "<begin_relevance_score>3<end_relevance_score>\n"
    "<begin_redundancy_score>0<end_redundancy_score>\n"
    "<begin_conclusion_complexity_score>1<end_conclusion_complexity_score>",
    "The statement is related to the target and could help with its main step.",
    "the a an of to in is it for and or not with by as on that this each every some all",
    "0 1 2 3 4 5 6 7 8 9 10 100 x y z n m k a b c f g h p q r s t",
)


def build_fingerprint(corpus: Sequence[str], settings: TinyModelSettings, seed: int) -> str:
    """Hex SHA-256 of everything that determines a build's output.

    ``corpus`` is the caller's text only; the built-in corpus is covered by
    :data:`BUILDER_VERSION`.
    """
    digest = hashlib.sha256()
    header = {"builder": BUILDER_VERSION, "settings": asdict(settings), "seed": seed}
    digest.update(json.dumps(header, sort_keys=True).encode())
    for text in corpus:
        data = text.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def _read_fingerprint(directory: Path) -> str | None:
    try:
        return json.loads((directory / BUILD_INFO_FILE).read_text())["fingerprint"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _train_tokenizer(texts: Sequence[str], settings: TinyModelSettings) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=settings.vocab_size,
        min_frequency=settings.min_token_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer, length=len(texts))
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        additional_special_tokens=list(ROLE_TOKENS),
        # Keep " ." and similar as written: proofs must decode to the exact text.
        clean_up_tokenization_spaces=False,
        model_max_length=settings.max_position_embeddings,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def _build_model(tokenizer: Any, settings: TinyModelSettings, seed: int) -> Any:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=settings.hidden_size,
        intermediate_size=settings.intermediate_size,
        num_hidden_layers=settings.num_hidden_layers,
        num_attention_heads=settings.num_attention_heads,
        num_key_value_heads=settings.num_key_value_heads,
        head_dim=settings.hidden_size // settings.num_attention_heads,
        max_position_embeddings=settings.max_position_embeddings,
        rope_theta=settings.rope_theta,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    # Seed a private copy of the RNG so the caller's random state is untouched.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config).to(torch.float32)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return model


def build_tiny_model(
    out_dir: str | os.PathLike[str],
    corpus: Iterable[str],
    settings: TinyModelSettings,
    seed: int = 0,
) -> Path:
    """Build the tiny model and tokenizer into ``out_dir`` and return its path.

    ``corpus`` is extra tokenizer training text (it may be empty); the
    built-in corpus is always added.  The directory is loadable with
    :func:`load_model_and_tokenizer` or any ``from_pretrained``.

    Idempotent: if ``out_dir`` already holds a build with the same
    fingerprint (:func:`build_fingerprint`) it is returned as is.  A build
    with another fingerprint is replaced.  A non-empty directory that is not
    a tiny-model build is never touched (``FileExistsError``).  The build is
    written to a temporary sibling and renamed into place, so concurrent
    builders of the same model are safe and a crash leaves no half-build.
    """
    if not isinstance(settings, TinyModelSettings):
        raise TypeError(f"settings must be a TinyModelSettings, got {type(settings).__name__}")
    out_dir = Path(out_dir)
    texts = list(corpus)
    fingerprint = build_fingerprint(texts, settings, seed)
    if _read_fingerprint(out_dir) == fingerprint:
        return out_dir
    if out_dir.exists() and _read_fingerprint(out_dir) is None and any(out_dir.iterdir()):
        raise FileExistsError(f"{out_dir} exists and is not a tiny-model build; refusing to overwrite it")

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.build-", dir=out_dir.parent))
    try:
        tokenizer = _train_tokenizer(texts + list(BUILTIN_CORPUS), settings)
        tokenizer.save_pretrained(staging)
        _build_model(tokenizer, settings, seed).save_pretrained(staging)
        info = {
            "fingerprint": fingerprint,
            "builder": BUILDER_VERSION,
            "seed": seed,
            "settings": asdict(settings),
            "corpus_texts": len(texts),
            "vocab_size": len(tokenizer),
        }
        (staging / BUILD_INFO_FILE).write_text(json.dumps(info, indent=2) + "\n")
        _move_into_place(staging, out_dir, fingerprint)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out_dir


def _move_into_place(staging: Path, out_dir: Path, fingerprint: str) -> None:
    """Rename a finished build to ``out_dir``, replacing a stale build there."""
    if out_dir.exists():
        if _read_fingerprint(out_dir) == fingerprint:
            return  # another process finished the same build first
        if _read_fingerprint(out_dir) is None:
            out_dir.rmdir()  # empty (checked by the caller); fails loudly if not
        else:
            retired = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
            os.replace(out_dir, retired / out_dir.name)
            shutil.rmtree(retired, ignore_errors=True)
    try:
        os.rename(staging, out_dir)
    except OSError:
        # Lost a race: a concurrent builder renamed its build in first.
        if _read_fingerprint(out_dir) != fingerprint:
            raise


def load_model_and_tokenizer(
    path: str | os.PathLike[str],
    *,
    tokenizer_path: str | os.PathLike[str] | None = None,
    dtype: str | None = None,
) -> tuple[Any, Any]:
    """Load a causal LM and its tokenizer the standard Hugging Face way.

    ``path`` and ``tokenizer_path`` (default: ``path``) are local
    directories or hub ids (hub ids need network access or a filled cache).
    ``dtype`` is a torch dtype name such as ``"float32"`` or ``"bfloat16"``;
    None keeps the dtype stored in the checkpoint.  The model is returned in
    eval mode on the CPU.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_dtype: Any = "auto"
    if dtype is not None:
        torch_dtype = getattr(torch, dtype, None)
        if not isinstance(torch_dtype, torch.dtype):
            raise ValueError(f"unknown dtype {dtype!r}; expected a torch dtype name such as 'bfloat16'")
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_path if tokenizer_path is not None else path))
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch_dtype)
    model.eval()
    return model, tokenizer
