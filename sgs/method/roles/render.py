"""Render the prompts of the three roles from Jinja2 template files.

A template directory holds one file per prompt, with these variables:
* ``solver.j2``: ``header`` (trimmed; may be empty) and ``statement``;
* ``conjecturer.j2``: ``target``, the unsolved statement without its header;
* ``conjecturer_unconditioned.j2``: none (the fixed prompt of the "no problem
  conditioning" ablation);
* ``guide.j2``: ``target`` and ``conjecture``;
* ``tactic.j2``: ``state`` (the goals before a step, as the prover prints
  them), ``premises`` (a block of retrieved lemmas) and ``proofs`` (the
  proofs of similar earlier lemmas; both may be empty): the Solver's prompt
  for one tactic, in a tactic-level search.

The package ships one directory per language (``templates/lean``,
``templates/rocq``); a config can point at any other directory to swap the
wording without touching code.  Templates see the problem text verbatim:
Jinja2 never evaluates the values it inserts, so model-written statements
cannot inject template code.
"""

from __future__ import annotations

import os
from pathlib import Path

import jinja2

from sgs.method.roles.language import Language

#: The packaged template directories, one per language.
TEMPLATE_ROOT = Path(__file__).parent / "templates"

#: The most header characters a Solver prompt shows.  A target traced from a
#: Rocq project has its file's whole text before the theorem for header (tens
#: of kilobytes); the prompt keeps its end, the definitions and lemmas nearest
#: the theorem, so that it fits the model's context.  Shorter headers (every
#: shipped target's) are shown whole.
MAX_PROMPT_HEADER_CHARS = 1_000
#: what stands for the part of a long header left out
HEADER_OMITTED = "(* ... the file's earlier text, in scope but not shown ... *)"

#: The template files every directory must provide.
PROMPT_NAMES = ("solver", "conjecturer", "conjecturer_unconditioned", "guide", "tactic")


def template_dir(source: str | os.PathLike) -> Path:
    """The template directory that ``source`` names: a language name
    (``"lean"``, ``"rocq"``) selects the packaged one, anything else is a path
    (write ``./lean`` for a local directory called ``lean``)."""
    if isinstance(source, str) and source in {language.value for language in Language}:
        return TEMPLATE_ROOT / source
    return Path(source)


class PromptSet:
    """The four prompts of one template directory.

    Construction fails fast (``FileNotFoundError``) when a template is
    missing, and rendering fails (``jinja2.UndefinedError``) when a template
    uses a variable its role does not provide: both are configuration errors.
    """

    def __init__(self, source: str | os.PathLike = "lean"):
        self.directory = template_dir(source)
        missing = [name for name in PROMPT_NAMES if not (self.directory / f"{name}.j2").is_file()]
        if missing:
            raise FileNotFoundError(
                f"prompt templates {', '.join(f'{n}.j2' for n in missing)} not found in {self.directory}")
        environment = jinja2.Environment(
            loader=jinja2.FileSystemLoader(self.directory),
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self._templates = {name: environment.get_template(f"{name}.j2") for name in PROMPT_NAMES}

    def solver(self, header: str, statement: str) -> str:
        """Ask for a proof of ``statement`` under ``header`` (imports, opens;
        only its end when it is long, see :data:`MAX_PROMPT_HEADER_CHARS`)."""
        return self._templates["solver"].render(header=prompt_header(header), statement=statement)

    def conjecturer(self, target: str) -> str:
        """Ask for a simpler lemma that helps prove the unsolved ``target``
        (the statement only: no header)."""
        return self._templates["conjecturer"].render(target=target)

    def conjecturer_unconditioned(self) -> str:
        """The fixed prompt of the "no problem conditioning" ablation."""
        return self._templates["conjecturer_unconditioned"].render()

    def guide(self, target: str, conjecture: str) -> str:
        """Ask for the three sub-scores of ``conjecture`` as a stepping stone
        towards ``target``."""
        return self._templates["guide"].render(target=target, conjecture=conjecture)

    def tactic(self, state: str, premises: str = "", proofs: str = "") -> str:
        """Ask for the next tactic in proof ``state`` (the goals as the prover
        prints them), with ``premises`` (retrieved lemmas) and ``proofs``
        (retrieved proofs of similar lemmas); either may be empty."""
        return self._templates["tactic"].render(state=state.strip(), premises=premises.strip(),
                                                proofs=proofs.strip())


def prompt_header(header: str) -> str:
    """``header`` trimmed, or, when longer than :data:`MAX_PROMPT_HEADER_CHARS`,
    :data:`HEADER_OMITTED` and its last lines that fit."""
    text = header.strip()
    if len(text) <= MAX_PROMPT_HEADER_CHARS:
        return text
    tail = text[-MAX_PROMPT_HEADER_CHARS:]
    tail = tail[tail.find("\n") + 1:] if "\n" in tail else tail   # whole lines only
    return f"{HEADER_OMITTED}\n{tail}"
