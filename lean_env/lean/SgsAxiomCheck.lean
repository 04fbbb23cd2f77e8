/-
SGS's trusted axiom check: the axioms of one theorem, read from a compiled
environment in a process where no proof text is ever elaborated.

Why a separate program: `#print axioms` runs in the environment the proof
built.  A proof that manages to add syntax or elaboration rules (a banned
keyword that got past the text pre-filter) can make `#print axioms` print
whatever it likes, in the REPL and in a compiled file alike.  This program's
whole source is parsed and elaborated before it loads anything of the proof's:
it reads the proof's constants as data, sends each one to the kernel again
(`Lean.Environment.replay`, as lean4checker does), and walks the theorem's
dependencies itself (`Lean.CollectAxioms`).  Syntax, macros, elaborators,
`initialize` blocks and environment extensions of the proof are never run.

Usage (inside the project, so that the imports resolve):

  lake -d PROJECT env lean --run SgsAxiomCheck.lean NONCE pickle FILE THEOREM
  lake -d PROJECT env lean --run SgsAxiomCheck.lean NONCE olean  FILE THEOREM

`pickle`: FILE was written by the REPL's `{"pickleTo": FILE, "env": N}`
(the imports and the constants added after them).  `olean`: FILE is the
`.olean` that `lean -o FILE` compiled from the audited source.

It prints exactly one line, `SGS-AXIOMS NONCE ` followed by JSON:
`{"theorem": T, "axioms": [..], "replayed": N}` or `{"error": TEXT}`, and
exits 0 when it could answer.  The NONCE is chosen by the caller after the
proof ran, so nothing the proof printed earlier can pass for this line.

Written for the Lean versions `tools/setup_lean.sh` installs (v4.15 and
later: `Std.HashMap`, `Environment.replay`); it has not been compiled on the
machines SGS is developed on, which cannot install Lean (docs/proof_checking.md).
-/
import Lean
open Lean

namespace SgsAxiomCheck

/-- What a `pickleTo` file holds (leanprover-community/repl,
`CommandSnapshot.pickle`): the imports, the constants added after them, then
the command state and context, which this check does not read (`NonScalar`
stands for them), cast to `ModuleData` for `saveModuleData`. -/
abbrev Pickled := Array Import × PHashMap Name ConstantInfo × NonScalar

/-- The imports and the new constants of FILE, read as data. -/
unsafe def readConstants (mode : String) (file : System.FilePath) :
    IO (Array Import × Std.HashMap Name ConstantInfo) := do
  let (data, _region) ← readModuleData file
  match mode with
  | "pickle" =>
    let (imports, added, _) : Pickled := unsafeCast data
    return (imports, added.foldl (fun m n c => m.insert n c) {})
  | "olean" =>
    let mut added : Std.HashMap Name ConstantInfo := {}
    for name in data.constNames, info in data.constants do
      added := added.insert name info
    return (data.imports, added)
  | other => throw <| IO.userError s!"unknown mode {other} (pickle or olean)"

/-- The theorem's name as the caller wrote it (`A.b`, `_root_.A.b`). -/
def parseName (text : String) : Name :=
  let plain := if text.startsWith "_root_." then text.drop 7 else text
  plain.toName

/-- The axioms `theorem` depends on in `env`, in Lean's own order. -/
def axiomsOf (env : Environment) (theorem : Name) : Array Name :=
  let ((), state) := ((CollectAxioms.collect theorem).run env).run {}
  state.axioms

def report (nonce : String) (fields : Json) : IO Unit :=
  IO.println s!"SGS-AXIOMS {nonce} {fields.compress}"

unsafe def check (mode file theoremText : String) : IO Json := do
  let (imports, added) ← readConstants mode file
  let theorem := parseName theoremText
  unless added.contains theorem do
    return Json.mkObj [("error", s!"the environment declares no constant {theoremText}")]
  -- every constant the proof's environment added goes through the kernel again,
  -- on top of the imports alone (lean4checker's check against environment hacking)
  let base ← importModules imports {} 0
  let env ← base.replay added
  let names := (axiomsOf env theorem).toList.map (toJson ∘ toString)
  return Json.mkObj [("theorem", toJson theoremText), ("axioms", Json.arr names.toArray),
                     ("replayed", toJson added.size)]

end SgsAxiomCheck

unsafe def main (args : List String) : IO UInt32 := do
  match args with
  | [nonce, mode, file, theorem] =>
    initSearchPath (← findSysroot)
    let answer ← try SgsAxiomCheck.check mode file theorem
      catch e => pure (Json.mkObj [("error", toString e)])
    SgsAxiomCheck.report nonce answer
    return 0
  | _ =>
    IO.eprintln "usage: lean --run SgsAxiomCheck.lean NONCE (pickle|olean) FILE THEOREM"
    return 2
