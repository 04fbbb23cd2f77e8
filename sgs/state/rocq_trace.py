"""Targets from a built Rocq project: one per theorem that can be checked in
its own file's context (``tools/trace_rocq_targets.py`` is the command).

For every declaration :mod:`sgs.state.rocq_declarations` finds in a project
file, the target is:

* ``id``: the logical path of the file and the name (``SearchTrees.Adding.insert_search``);
* ``header``: the file's text before the declaration, so every definition,
  notation, hint, ``Require`` and option of the file before it is in scope,
  as it was for the author; never the declaration or anything after it;
* ``statement``: the declaration's sentence, as written;
* ``proof``: the human proof (for reference and warm starts; the targets
  reader never passes it on, so the Solver never sees it);
* ``load_path``: the project's ``-R``/``-Q`` items, bound to the build
  directory (absolute), so that the header's ``Require``s load the project's
  compiled files;
* ``project``: the build directory and the digest of its sources
  (:func:`sgs.state.rocq_project.source_digest`), checked when the file is read;
* ``source``: the project folder, the file (relative) and the line;
* ``held_out``: whether its file is in the held-out files (:func:`held_out_files`).

The verifier must be able to call the human proof valid, or the target would
teach nothing true, so a declaration is also skipped, with its reason, when
the verifier's text checks refuse its statement or its proof (``statement
refused: <reason>``, ``proof refused: <reason>``; e.g. a proof by ``fix``),
its header is longer than the verifier accepts, or its proof depends on an
axiom (``needs axioms``: ``Print Assumptions`` of the compiled theorem, in a
coqtop with the project loaded, lists one; an ``Admitted`` lemma it uses
counts as one), since by default a valid proof may use none.

A declaration inside a section, a module, a functor or a module type gets a
header and (in a section) a statement of its own
(:mod:`sgs.state.rocq_declarations`), no longer the file's text, so its human
proof is checked by the verifier itself (:class:`lean_env.rocq.backend.RocqBackend`,
with the task's load path) before it is kept: ``human proof fails at the top
level: <reason>`` when it is not valid there, ``needs axioms: <names>`` (the
names as ``Print Assumptions`` prints them under that header) when only the
axioms are wrong.

``allow_project_axioms`` (``--allow-project-axioms``; off by default): a
target whose proof needs only the project's own ``Axiom``/``Parameter``
declarations (a functor's parameters included; never a lemma the project left
``Admitted``, nor the standard library's axioms) is kept, with those names in
its ``allowed_axioms``, once the verifier has found its human proof valid
with them allowed.  A run honours them through ``prover.allowed_axioms``
(the union is printed by the tool): the verifier's allowed axioms are one
setting per run, not per target.
"""

from __future__ import annotations

import dataclasses
import random
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from lean_env.rocq.backend import RocqBackend
from lean_env.rocq.checks import RocqTextError, validate_proof, validate_statement
from lean_env.rocq.config import RocqConfig
from lean_env.rocq.load_path import LoadPathEntry, load_path_argv, to_json
from lean_env.rocq.output import parse_assumptions
from lean_env.rocq.session import RocqSession
from lean_env.verdict import ProofTask
from sgs.state.rocq_declarations import Declaration, find_declarations, project_axioms
from sgs.state.rocq_project import Project, ProjectError, source_digest

#: seconds allowed to load the project's libraries and answer each query
QUERY_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Candidate:
    """A declaration of one file on its way to becoming a target."""

    file: str
    module: str
    declaration: Declaration

    @property
    def id(self) -> str:
        return ".".join((self.module, *self.declaration.path, self.declaration.name))


@dataclass(frozen=True)
class Skipped:
    """A declaration that did not become a target."""

    id: str
    file: str
    line: int
    reason: str

    def to_json(self) -> dict:
        return {"id": self.id, "file": self.file, "line": self.line, "reason": self.reason}


@dataclass
class Trace:
    """What tracing a project produced."""

    targets: list[dict]
    skipped: list[Skipped]
    #: every name some target's ``allowed_axioms`` lists (``allow_project_axioms``)
    allowed_axioms: tuple[str, ...] = ()

    def reason_counts(self) -> Counter:
        return Counter(s.reason.split(":")[0] for s in self.skipped)


def build_load_path(project: Project, build_dir: Path) -> tuple[LoadPathEntry, ...]:
    """The project's ``-R``/``-Q`` items bound to the (absolute) build directory."""
    return tuple(LoadPathEntry(item.flag, str((build_dir / item.directory).resolve()), item.name)
                 for item in project.load_path)


def trace(project: Project, build_dir: Path, *, held_out_fraction: float = 0.0, seed: int = 0,
          config: RocqConfig | None = None, allow_project_axioms: bool = False) -> Trace:
    """The targets of a project already built in ``build_dir``."""
    config = config or RocqConfig()
    load_path = build_load_path(project, build_dir)
    candidates: list[Candidate] = []
    skipped: list[Skipped] = []
    own_axioms: set[str] = set()
    admitted: set[str] = set()
    for source in project.sources:
        module = project.logical_module(source)
        try:
            text = (build_dir / source).read_text(encoding="utf-8")
            found, not_found = find_declarations(text)
            own_axioms |= project_axioms(text)
        except (RocqTextError, UnicodeDecodeError) as error:
            raise ProjectError(f"{project.root / source} cannot be split into sentences: {error}") from None
        skipped += [Skipped(".".join((module, *s.path, s.name)), source, s.line, s.reason) for s in not_found]
        admitted |= {s.name for s in not_found if s.reason.startswith("not proved")}
        for declaration in found:
            candidate = Candidate(source, module, declaration)
            reason = _refused_by_checks(candidate, config)
            if reason is None:
                candidates.append(candidate)
            else:
                skipped.append(_skip(module, source, declaration.name, declaration.line, reason))
    # an Admitted lemma is never an axiom a proof may rely on, whatever its name shares
    own_axioms -= admitted
    plain = [c for c in candidates if not c.declaration.generalised]
    needs_axioms = axioms_needed(plain, load_path, config)
    # in its block's context (or, to learn the axioms' names as the verifier prints
    # them under the header, for the axioms) the verifier checks the human proof itself
    in_context = [c for c in candidates if c.declaration.generalised
                  or (allow_project_axioms and c.id in needs_axioms)]
    chosen: dict[str, str] = {}
    failures = human_proofs_checked(in_context, load_path, config, chosen)
    in_context = [Candidate(c.file, c.module, dataclasses.replace(c.declaration, statement=chosen[c.id],
                                                                 alternatives=()))
                  for c in in_context]
    checked = {c.id: c for c in in_context}
    candidates = [checked.get(c.id, c) for c in candidates]
    allowed: dict[str, tuple[str, ...]] = {}
    if allow_project_axioms:
        roots = tuple(f"{item.name}." for item in project.load_path)
        own = {c.id: failure[1] for c in in_context if (failure := failures.get(c.id)) and failure[0] == "axioms"
               and all(_own_axiom(path, c.declaration.header, own_axioms, roots) for path in failure[2])}
        names = tuple(sorted({name for axioms in own.values() for name in axioms}))
        rechecked = human_proofs_checked([c for c in in_context if c.id in own], load_path,
                                         dataclasses.replace(config, allowed_axioms=(*config.allowed_axioms, *names)))
        for candidate_id, axioms in own.items():
            if candidate_id in rechecked:
                failures[candidate_id] = rechecked[candidate_id]
            else:
                allowed[candidate_id] = axioms
                del failures[candidate_id]
    kept = []
    for candidate in candidates:
        declaration = candidate.declaration
        if candidate.id in failures:
            kind, detail, _ = failures[candidate.id]
            reason = ("needs axioms: " + ", ".join(detail) if kind == "axioms"
                      else f"human proof fails at the top level: {detail[0]}")
        elif candidate.id in needs_axioms and candidate.id not in allowed and candidate.id not in checked:
            # (the verifier's own check, where there was one, decides)
            reason = "needs axioms: " + ", ".join(needs_axioms[candidate.id])
        else:
            kept.append(candidate)
            continue
        skipped.append(Skipped(candidate.id, candidate.file, declaration.line, reason))
    held_out = held_out_files(sorted({c.file for c in kept}), held_out_fraction, seed)
    project_record = {"dir": str(build_dir.resolve()), "digest": source_digest(build_dir)}
    targets = [_target(c, project, load_path, project_record, c.file in held_out, allowed.get(c.id))
               for c in kept]
    return Trace(targets, skipped, tuple(sorted({n for c in kept for n in allowed.get(c.id, ())})))


def human_proofs_checked(candidates: Iterable[Candidate], load_path: tuple[LoadPathEntry, ...],
                         config: RocqConfig, chosen: dict[str, str] | None = None,
                         ) -> dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """The verifier's verdict on each candidate's own human proof, under the
    candidate's header and statement: for each one that is not valid,
    ``("axioms", names, paths)`` when only its axioms are refused (the names
    as printed, and the full path of each as ``Locate`` finds it under that
    header), else ``("invalid", (reason,), ())``.  A candidate in a section
    is tried with its statement and then its alternatives (over more of the
    section's variables); ``chosen`` receives the statement each one ends on.  One backend, the candidates in file order, so
    its session moves forward between headers that share a prefix."""
    candidates = list(candidates)
    if not candidates:
        return {}
    # no census (its coqchk runs take minutes): Print Assumptions after every proof instead
    config = dataclasses.replace(config, spare=False, axiom_census=False)
    chosen = {} if chosen is None else chosen
    failures: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {}
    with RocqBackend(config) as backend:
        for candidate in candidates:
            declaration = candidate.declaration
            for statement in (declaration.statement, *declaration.alternatives):
                task = ProofTask(candidate.id, declaration.header, statement, declaration.proof,
                                 tuple(tuple(entry) for entry in to_json(load_path)))
                verdict = backend.check_proof(task, QUERY_TIMEOUT_S)
                # the first statement the proof holds (or whose only fault is axioms: more
                # variables would not remove those) is the one the target keeps
                if verdict.valid or verdict.reason == "axioms":
                    break
            chosen[candidate.id] = statement
            if verdict.valid:
                continue
            assumptions = parse_assumptions(verdict.messages[0]) if verdict.reason == "axioms" else None
            if assumptions is not None and assumptions.axioms and not assumptions.other:
                paths = tuple(_locate(backend, name) for name in assumptions.axioms)
                failures[candidate.id] = ("axioms", assumptions.axioms, paths)
            else:
                message = " ".join(" ".join(verdict.messages).split())[:160]
                failures[candidate.id] = ("invalid", (f"{verdict.reason}: {message}" if message else verdict.reason,), ())
    return failures


def _locate(backend: RocqBackend, name: str) -> str:
    """The full path of the constant ``name`` prints as, in the backend's
    session (still under the header of the proof it just checked): a short
    name alone cannot tell a project's axiom from a library's of the same
    name.  Empty when Coq names none."""
    session = backend._session   # a read-only query in the verifier's own session, after its check
    if session is None or not re.fullmatch(r"[\w.']+", name):
        return ""
    reply = session.run(f"Locate {name}.", time.monotonic() + QUERY_TIMEOUT_S)
    found = re.search(r"^Constant\s+([\w.']+)", reply.output, re.M)
    return found.group(1) if found else ""


def _own_axiom(path: str, header: str, own_axioms: set[str], roots: tuple[str, ...]) -> bool:
    """Whether the axiom at ``path`` is the project's own: a field of a
    functor parameter the header declares (``Top.X.t`` after ``Declare Module
    X``), or an ``Axiom``/``Parameter`` of the project (in a project file,
    ``Root.File.name``, or in the header itself, ``Top.name``)."""
    parts = path.split(".")
    if len(parts) >= 3 and parts[0] == "Top" and re.search(rf"^Declare Module {re.escape(parts[1])} :", header, re.M):
        return True
    return parts[-1] in own_axioms and (path.startswith(roots) or len(parts) == 2 and parts[0] == "Top")


def _skip(module: str, file: str, name: str, line: int, reason: str) -> Skipped:
    return Skipped(f"{module}.{name}", file, line, reason)


def _refused_by_checks(candidate: Candidate, config: RocqConfig) -> str | None:
    """Why the verifier would refuse this target's own proof before running
    it (its text checks, its header length), or None."""
    declaration = candidate.declaration
    if len(declaration.header) > config.max_project_header_chars:
        return (f"header too long: {len(declaration.header)} characters "
                f"(at most {config.max_project_header_chars})")
    allowed = frozenset(config.allow_bug_prone_features)
    try:
        validate_statement(declaration.statement, max_chars=config.max_statement_chars, allowed=allowed)
    except RocqTextError as error:
        return f"statement refused: {error.reason}"
    try:
        validate_proof(declaration.proof, max_chars=config.max_proof_chars, max_sentences=config.max_sentences,
                       allowed=allowed)
    except RocqTextError as error:
        return f"proof refused: {error.reason}"
    return None


def axioms_needed(candidates: Iterable[Candidate], load_path: tuple[LoadPathEntry, ...],
                  config: RocqConfig) -> dict[str, tuple[str, ...]]:
    """For each candidate whose compiled theorem depends on something not
    allowed (``Print Assumptions`` in one coqtop with the project loaded),
    what it depends on."""
    candidates = list(candidates)
    if not candidates:
        return {}
    session = RocqSession(config.argv(load_path_argv(load_path)), env=config.child_env(), limits=config.limits(), name="coqtop")
    allowed = frozenset(config.allowed_axioms)
    needed: dict[str, tuple[str, ...]] = {}
    try:
        session.wait_ready(time.monotonic() + config.start_timeout)
        for module in dict.fromkeys(c.module for c in candidates):
            reply = session.run(f"Require {module}.", time.monotonic() + QUERY_TIMEOUT_S)
            if not reply.ok:
                raise ProjectError(f"the compiled {module} does not load: {reply.message[:300]}")
        for candidate in candidates:
            reply = session.run(f"Print Assumptions {candidate.id}.", time.monotonic() + QUERY_TIMEOUT_S)
            assumptions = parse_assumptions(reply.output) if reply.ok else None
            if assumptions is None or not assumptions.acceptable(allowed):
                found = (*assumptions.axioms, *assumptions.other) if assumptions else ("(query failed)",)
                needed[candidate.id] = tuple(a for a in found if a not in allowed)
    finally:
        session.kill()
    return needed


def held_out_files(files: list[str], fraction: float, seed: int) -> set[str]:
    """The files whose targets are held out: ``fraction`` of them (at least
    one when the fraction is positive and there are two files or more),
    drawn with ``seed``, so that evaluation is on files never trained on."""
    if fraction <= 0 or len(files) < 2:
        return set()
    count = min(len(files) - 1, max(1, round(fraction * len(files))))
    return set(random.Random(seed).sample(sorted(files), count))


def _target(candidate: Candidate, project: Project, load_path: tuple[LoadPathEntry, ...],
            project_record: dict, held_out: bool, allowed_axioms: tuple[str, ...] | None) -> dict:
    declaration = candidate.declaration
    row = {
        "id": candidate.id,
        "header": declaration.header,
        "statement": declaration.statement,
        "proof": declaration.proof,
        "held_out": held_out,
        "load_path": to_json(load_path),
        "project": project_record,
        "source": {"project": str(project.root), "file": candidate.file, "line": declaration.line},
    }
    if declaration.generalised:
        # where it stands in its file (the header closes or inlines these blocks)
        row["context"] = declaration.context
    if allowed_axioms:
        row["allowed_axioms"] = list(allowed_axioms)
    return row
