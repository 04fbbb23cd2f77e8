"""What a finished proof term contains: the check by content behind the
checks by words.

The word checks (:mod:`lean_env.rocq.checks`) refuse ``fix``, ``cofix`` and
the VM where a proof *writes* them, but a proof can build a term without
writing its words: Ltac2's unsafe term API (``Constr.Unsafe.make
(Constr.Unsafe.Fix ...)``, in Ltac2 proof mode or inside a term-level
``ltac2:(...)``) makes the non-terminating fixpoint of rocq#20413, whose
proof of ``False`` Coq 8.16.1 and ``coqchk`` both accept.  So after the
proof's ``Qed`` the backend asks the checker's own session to print the
theorem's body under printing settings it sets itself (:data:`PRINT_SETTINGS`:
no notations, no elided subterms) and reads it here:

* a local fixpoint or cofixpoint (``fix``/``cofix`` in the printed term)
  is refused (``known_bug:fixpoints``) unless that feature is allowed or it
  is an exact copy of a library constant's body (:func:`unexplained_fixpoints`).
  Library induction principles and recursive functions are constants and
  print by name; a ``fix`` appears where the proof built one, or where it
  unfolded a library function into a goal or hypothesis (``unfold testbit``
  puts ``Nat.testbit``'s body there, a copy; ``injection`` on ``map f l =
  map g l`` puts an instance of ``List.map``'s fixpoint, with ``f``
  replaced, :func:`match_instance`); a changed fixpoint is refused;
* a VM or native cast (``<:``, ``<<:``) is what ``lia``, ``ring``, ``field``,
  ``nsatz`` and ``btauto`` leave in their terms to check a certificate by
  computation: these stay allowed.  The VM bugs a term can reach need
  primitive integers, floats or arrays (rocq#19402: ``addmuldiv``), so a
  proof with a VM cast is refused (``known_bug:vm_reduction``) when its
  assumptions include a primitive type (:data:`PRIMITIVE_TYPES`), which
  ``Print Assumptions`` lists like axioms; when the axiom census shows the
  header's libraries declare no axiom and no primitive, no primitive is
  reachable.

``Qed`` inlines the constants ``abstract``/``transparent_abstract`` declare
(their bodies print inside the theorem's), and the backend closes a
``Defined`` proof with ``Qed`` for this reason: nothing the proof declared
is left outside the printed term.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Optional

from lean_env.rocq.known_bugs import BUG_CLASSES

#: the checker's own sentences before it prints the term: every implicit
#: argument, coercion and cast shown, no notation (which could print a
#: ``fix`` under another name), and no depth beyond which Coq prints ``...``
PRINT_SETTINGS = ("Set Printing All.", "Set Printing Depth 2147483647.",
                  # one constructor and its variables per branch, so that pattern variables are known
                  "Unset Printing Factorizable Match Patterns.", "Unset Printing Allow Match Default Clause.")

#: the primitive types of Coq 8.16 (``PrimInt63.int``, ``PrimFloat.float``,
#: ``PArray.array``), as ``Print Assumptions`` names them (last component)
PRIMITIVE_TYPES = frozenset({"int", "float", "array"})

_FIX = re.compile(r"(?<![\w'])(?:fix|cofix)(?![\w'])")
_VM_CAST = re.compile(r"<<?:")


@dataclass(frozen=True)
class TermFeatures:
    """What the printed proof term contains."""

    #: local fixpoints or cofixpoints
    fixpoints: int
    #: VM or native casts
    vm_casts: int


def scan_term(printed: str) -> TermFeatures:
    """Count the features in ``Print`` output of a proof term (printed
    under :data:`PRINT_SETTINGS`).  A name that merely contains ``fix``
    (``fix_x``, ``prefix``) is not one; anything else spelled ``fix`` counts,
    so a misreading refuses, never passes."""
    return TermFeatures(fixpoints=len(_FIX.findall(printed)), vm_casts=len(_VM_CAST.findall(printed)))


_TOKEN = re.compile(r"[\w'.@]+|\S")
#: what may follow a complete term inside a larger one, so that a library
#: body matched up to here is the whole fixpoint, not the start of a longer one
_ENDS_TERM = frozenset({")", "in", "end", "|"})
_LOCATED = re.compile(r"^Constant\s+(\S+)", re.M)
#: at most this many library constants are printed to explain one fixpoint name
MAX_CANDIDATES = 16
#: most distinct fixpoint names looked up in the libraries per proof: no proof
#: unfolds that many library functions, so a term with more is refused unread
MAX_FIXPOINT_NAMES = 32


def tokens(printed: str) -> list[str]:
    """``printed`` as tokens, so that where Coq's printer broke lines (or
    put a zero-width break between a bracket and a word) does not matter."""
    return _TOKEN.findall(printed)


def fixpoint_names(term: list[str]) -> set[str]:
    """The names the term's fixpoints give themselves (``fix testbit ...``)."""
    return {term[i + 1] for i, token in enumerate(term[:-1]) if token in ("fix", "cofix")}


def located_constants(output: str, own_module: str = "Top") -> list[str]:
    """The qualified constants ``Locate <name>`` lists, except those of the
    checker's own module ``own_module`` (what a proof declares lives there)."""
    return [name for name in _LOCATED.findall(output)
            if not name.startswith(own_module + ".")][:MAX_CANDIDATES]


def printed_body(output: str) -> list[str]:
    """The tokens of a constant's body from ``Print <constant>`` output
    (``name = body\n     : type``), or ``[]`` when it is no fixpoint."""
    first = output.strip().split("\n\n", 1)[0]
    head, eq, rest = first.partition("=")
    body = rest.rsplit("\n     : ", 1)[0] if eq else ""
    found = tokens(body)
    _, fixpoint = split_parameters(found)
    return found if fixpoint[:1] in (["fix"], ["cofix"]) else []


def split_parameters(body: list[str]) -> tuple[frozenset[str], list[str]]:
    """A library body ``fun (A B : Type) (f : ...) => fix map ...`` as its
    parameters (``A``, ``B``, ``f``) and the fixpoint after them; a body
    that is a fixpoint itself has none."""
    if body[:1] != ["fun"]:
        return frozenset(), body
    params: set[str] = set()
    j, depth, expecting_names = 1, 0, True
    while j + 1 < len(body) and not (depth == 0 and body[j] == "=" and body[j + 1] == ">"):
        token = body[j]
        if token == "(":
            depth += 1
            expecting_names = True
        elif token == ")":
            depth -= 1
        elif token == ":":
            expecting_names = False
        elif expecting_names and depth <= 1 and _identifier(token):
            params.add(token)
        j += 1
    return frozenset(params), body[j + 2:]


def _identifier(token: str) -> bool:
    return re.fullmatch(r"[^\W\d][\w']*", token) is not None


def bound_names(term: list[str]) -> set[str]:
    """The names ``term`` binds, read from the binding positions of printed
    Gallina (under :data:`PRINT_SETTINGS`): fixpoint names, ``fun``/``forall``/
    ``fix`` binders, ``let x``, ``as x`` and the variables of a branch's
    pattern (``| C x y =>``).  A name bound another way (``in`` clauses) is
    left out: it must then match exactly, which can only refuse more."""
    bound: set[str] = set()
    n = len(term)
    for i, token in enumerate(term):
        nxt = term[i + 1] if i + 1 < n else ""
        if token in ("let", "as", "with") and _identifier(nxt):
            bound.add(nxt)   # ``with`` before a name: the next body of a mutual fixpoint
        if token in ("fix", "cofix", "fun", "forall"):
            j = i + 2 if token in ("fix", "cofix") else i + 1
            if token in ("fix", "cofix") and _identifier(nxt):
                bound.add(nxt)
            while j < n:
                if term[j] == "(":
                    j += 1
                    while j < n and _identifier(term[j]):
                        bound.add(term[j])
                        j += 1
                    depth = 1
                    while j < n and depth:
                        depth += {"(": 1, ")": -1}.get(term[j], 0)
                        j += 1
                elif _identifier(term[j]):
                    while j < n and _identifier(term[j]):
                        bound.add(term[j])
                        j += 1
                    break
                else:
                    break
        if token == "|":
            j = i + 2   # after the constructor
            while j < n and term[j] != "=" and _identifier(term[j]):
                bound.add(term[j])
                j += 1
    return bound


def alpha_equal(library: list[str], copy: list[str]) -> bool:
    """Whether ``copy`` is ``library`` with bound names renamed (the printer
    renames a copy's variables away from the names around it: ``a`` becomes
    ``a0``): equal token for token, except names both sides bind, which must
    correspond one to one.  A free name (a constant) must be the same name,
    free on both sides."""
    if len(library) != len(copy):
        return False
    library_bound, copy_bound = bound_names(library), bound_names(copy)
    forward: dict[str, str] = {}
    backward: dict[str, str] = {}
    for a, b in zip(library, copy):
        a_bound, b_bound = a in library_bound, b in copy_bound
        if not a_bound and not b_bound:
            if a != b:
                return False
        elif a_bound and b_bound:
            if forward.setdefault(a, b) != b or backward.setdefault(b, a) != a:
                return False
        else:
            return False
    return True


_KEYWORDS = frozenset({"fun", "fix", "cofix", "forall", "let", "in", "match", "with", "end", "return", "as", "if",
                       "then", "else", "for"})


def _segment_end(term: list[str], j: int) -> int | None:
    """The end of the argument term starting at ``j``: one name or number,
    or a bracketed group."""
    if j >= len(term):
        return None
    if term[j] == "(":
        depth = 0
        for k in range(j, len(term)):
            depth += {"(": 1, ")": -1}.get(term[k], 0)
            if depth == 0:
                return k + 1
        return None
    return j + 1 if re.fullmatch(r"[\w'.@]+", term[j]) and term[j] not in _KEYWORDS else None


def match_instance(library: list[str], term: list[str], start: int) -> int | None:
    """Where the copy of ``library`` (a body from :func:`printed_body`) that
    starts at ``term[start]`` ends, or ``None`` when there is none.  The
    body's parameters (``A``, ``f`` of ``fun A f => fix map ...``) may stand
    for any argument (``injection`` on ``map f l = map g l`` puts
    ``fix map`` with ``f`` replaced in the term): the copy is then the
    library function applied to those arguments, as terminating as the
    constant, provided each parameter stands for the same argument
    everywhere, no argument holds a fixpoint of its own and none mentions a
    name the fixpoint binds (which would make it part of the recursion)."""
    params, fixpoint = split_parameters(library)
    if not fixpoint:
        return None
    placeholder = "\x00argument"
    structure: list[str] = []
    arguments: dict[str, list[str]] = {}
    j = start
    for token in fixpoint:
        if token in params:
            end = _segment_end(term, j)
            if end is None or any(t in ("fix", "cofix") for t in term[j:end]):
                return None
            if arguments.setdefault(token, term[j:end]) != term[j:end]:
                return None
            structure.append(placeholder)
            j = end
            continue
        if j >= len(term):
            return None
        structure.append(term[j])
        j += 1
    if not (j == len(term) or term[j] in _ENDS_TERM):
        return None
    shape = [placeholder if t in params else t for t in fixpoint]
    if not alpha_equal(shape, structure):
        return None
    bound_in_copy = bound_names(structure)
    if any(t in bound_in_copy for argument in arguments.values() for t in argument):
        return None
    return j


def unexplained_fixpoints(term: list[str], library_bodies: list[list[str]]) -> int:
    """How many of the term's fixpoints are not an exact copy of a library
    constant's body.  ``unfold testbit`` puts ``Nat.testbit``'s own body in
    the goal, and so in the term (through the cast that records the new
    goal): a fixpoint the library's compilation already checked, as safe as
    the constant.  A copy counts only when it is the body up to the names of
    bound variables (:func:`alpha_equal`) and the next token ends the term,
    so a longer or changed fixpoint is never one."""
    unexplained = 0
    i = 0
    while i < len(term):
        if term[i] not in ("fix", "cofix"):
            i += 1
            continue
        for body in library_bodies:
            end = match_instance(body, term, i)
            if end is not None:
                i = end   # the fixpoints nested in the copy are the library's too
                break
        else:
            unexplained += 1
            i += 1
    return unexplained


def reaches_primitives(axioms: tuple[str, ...]) -> bool:
    """Whether ``Print Assumptions`` names (possibly qualified) include a
    primitive type, through which the VM's known wrong answers are reached."""
    return any(name.rsplit(".", 1)[-1] in PRIMITIVE_TYPES for name in axioms)


_IDENTIFIER = re.compile(r"[^\W\d][\w']*")


def lookup_names(term: list[str]) -> Optional[list[str]]:
    """The fixpoint names of ``term`` worth looking up in the libraries (plain
    identifiers: nothing else is sent to Coq), or ``None`` when there are more
    than :data:`MAX_FIXPOINT_NAMES` (no proof unfolds that many library
    functions: every fixpoint then counts as the proof's own)."""
    names = fixpoint_names(term)
    if len(names) > MAX_FIXPOINT_NAMES:
        return None
    return sorted(name for name in names if _IDENTIFIER.fullmatch(name))


def unexplained_in_session(run: Callable[[str], tuple[bool, str]], printed: str) -> int:
    """:func:`unexplained_fixpoints` of a printed term, its library candidates
    looked up one sentence at a time with ``run(sentence) -> (ok, output)``
    (``Locate`` of each name, ``Print`` of each constant it finds, under the
    printing settings already in force)."""
    term = tokens(printed)
    names = lookup_names(term)
    if names is None:
        return len(fixpoint_names(term))
    bodies: list[list[str]] = []
    for name in names:
        located, where = run(f"Locate {name}.")
        for constant in located_constants(where) if located else ():
            shown, output = run(f"Print {constant}.")
            body = printed_body(output) if shown else []
            if body:
                bodies.append(body)
    return unexplained_fixpoints(term, bodies)


@dataclass(frozen=True)
class Objection:
    """Why a proof term is refused: the verdict reason and its explanation."""

    reason: str
    message: str


def objection(found: TermFeatures, axioms: tuple[str, ...], allowed_features: frozenset[str]
              ) -> Optional[Objection]:
    """The known-bug class a term reaches, given what it contains (``found``,
    its fixpoints already net of library copies), the assumptions ``Print
    Assumptions`` listed and the features the config allows; ``None`` when
    it reaches none.  The session check and the audit both decide here."""
    fixpoints, vm = (c for c in BUG_CLASSES if c.name in ("fixpoints", "vm_reduction"))
    if found.fixpoints and fixpoints.name not in allowed_features:
        return Objection(fixpoints.reason, (
            f"the proof term contains {found.fixpoints} local fixpoint(s) (fix/cofix), built without "
            f"writing them: {fixpoints.summary} ({', '.join(fixpoints.bugs)}); refused unless "
            f"allow_bug_prone_features includes {fixpoints.name!r}"))
    if found.vm_casts and vm.name not in allowed_features and reaches_primitives(axioms):
        return Objection(vm.reason, (
            f"the proof term checks {found.vm_casts} cast(s) with the VM and depends on primitive "
            f"integers, floats or arrays: {vm.summary} ({', '.join(vm.bugs)}); refused unless "
            f"allow_bug_prone_features includes {vm.name!r}"))
    return None


def nothing_to_look_for(axioms: tuple[str, ...], allowed_features: frozenset[str]) -> bool:
    """Whether no term could be refused (fixpoints allowed, and the VM either
    allowed or out of reach), so that printing it can be skipped."""
    return "fixpoints" in allowed_features and ("vm_reduction" in allowed_features or not reaches_primitives(axioms))
