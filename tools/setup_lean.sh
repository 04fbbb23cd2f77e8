#!/usr/bin/env bash
# Set up the Lean 4 prover for SGS: elan, the leanprover-community REPL and a
# Mathlib checkout with its prebuilt cache, all at ONE matching tag, then print
# the settings that point the Lean backend at them.
#
# Needs internet access to GitHub (elan, toolchains, the REPL, Mathlib and its
# cache come from there) plus git and curl.  It cannot run on machines that only
# reach package registries; there the Rocq backend is the real prover.  Without
# GitHub it stops before writing anything (exit 1); a run that fails later
# removes what it created (exit 1); a tag a repository lacks is exit 2.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: tools/setup_lean.sh [--tag TAG] [--dir DIR] [--no-check] [--help]

Installs (or updates) in DIR:
  elan        Lean's toolchain manager (into ~/.elan, only if missing)
  DIR/repl    leanprover-community/repl at TAG, built (.lake/build/bin/repl)
  DIR/mathlib leanprover-community/mathlib4 at TAG, with the prebuilt .olean
              cache (lake exe cache get)
then checks that a REPL answers under Mathlib and that SGS's axiom checker
(lean_env/lean/SgsAxiomCheck.lean) reads the REPL's pickle of that proof's
environment, and prints the settings to use.

Options:
  --tag TAG   Lean/Mathlib/REPL tag (default: $SGS_LEAN_TAG or v4.15.0, the
              Lean version of the SGS paper).  The REPL and Mathlib must use the
              same toolchain; REPL tags up to v4.9.0 lack an output flush that a
              long-lived client needs.
  --dir DIR   where to put the checkouts (default: $SGS_LEAN_DIR or
              ~/.cache/sgs-lean)
  --no-check  skip the final smoke test (importing Mathlib takes a while)
  --help      show this help

Afterwards use the printed settings, e.g.:
  python -m sgs prover=lean prover.lean.repl_command='<command>' prover.lean.project_dir=DIR/mathlib \
      prover.lean.lake_command=<lake>
  export SGS_LEAN_REPL='<command>' SGS_LEAN_PROJECT=DIR/mathlib SGS_LEAN_LAKE=<lake>     # conf/prover/lean.yaml
  export LEAN_ENV_REPL_COMMAND='<command>' LEAN_ENV_PROJECT_DIR=DIR/mathlib LEAN_ENV_LAKE_COMMAND=<lake>
                                                                     # LeanConfig.from_env
EOF
}

TAG="${SGS_LEAN_TAG:-v4.15.0}"
DIR="${SGS_LEAN_DIR:-$HOME/.cache/sgs-lean}"
CHECK=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tag) [[ $# -ge 2 ]] || { echo "--tag needs a value" >&2; exit 2; }; TAG="$2"; shift 2 ;;
    --tag=*) TAG="${1#*=}"; shift ;;
    --dir) [[ $# -ge 2 ]] || { echo "--dir needs a value" >&2; exit 2; }; DIR="$2"; shift 2 ;;
    --dir=*) DIR="${1#*=}"; shift ;;
    --no-check) CHECK=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
  esac
done

[[ "$TAG" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-rc[0-9]+)?$ ]] || { echo "--tag must look like v4.15.0, got '$TAG'" >&2; exit 2; }
[[ -n "$DIR" ]] || { echo "--dir must not be empty" >&2; exit 2; }

say() { echo "[setup_lean] $*"; }
fail() { echo "[setup_lean] $*" >&2; exit 1; }
for tool in git curl; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool is required"
done

# 0. Before anything is written: GitHub must answer, and both repositories
# must have TAG.  Without network access this is where the script stops.
for repo in leanprover-community/repl leanprover-community/mathlib4; do
  if ! found="$(git ls-remote --tags "https://github.com/$repo" "refs/tags/$TAG" 2>&1)"; then
    echo "[setup_lean] cannot reach GitHub (https://github.com/$repo): ${found##*$'\n'}" >&2
    fail "this script needs internet access to github.com (elan, the REPL, Mathlib and its cache come from there); nothing was installed or changed"
  fi
  [[ -n "$found" ]] || { echo "[setup_lean] tag $TAG not found in $repo; pick a tag both repositories have" >&2; exit 2; }
done

# What this run creates is removed again if it fails, so that no half-built
# checkout is left behind (checkouts from an earlier run are kept and re-used).
CREATED=()
cleanup() {
  local status=$?
  if [[ $status -ne 0 && ${#CREATED[@]} -gt 0 ]]; then
    echo "[setup_lean] failed; removing what this run created: ${CREATED[*]}" >&2
    rm -rf -- "${CREATED[@]}"
  fi
}
trap cleanup EXIT
[[ -d "$DIR" ]] || CREATED+=("$DIR")
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"

# 1. elan (installs toolchains on demand from each project's lean-toolchain)
export PATH="$HOME/.elan/bin:$PATH"
if ! command -v elan >/dev/null 2>&1; then
  say "installing elan"
  [[ -d "$HOME/.elan" ]] || CREATED+=("$HOME/.elan")
  curl -sSfL https://raw.githubusercontent.com/leanprover/elan/master/elan-init.sh \
    | sh -s -- -y --default-toolchain none --no-modify-path
fi

# clone_at URL DEST TAG: a shallow checkout of exactly TAG (re-used if present)
clone_at() {
  local url="$1" dest="$2" tag="$3"
  [[ -d "$dest/.git" ]] || CREATED+=("$dest")
  if [[ -d "$dest/.git" ]]; then
    git -C "$dest" fetch --quiet --depth 1 origin "refs/tags/$tag:refs/tags/$tag"
    git -C "$dest" -c advice.detachedHead=false checkout --quiet "tags/$tag"
  else
    git -c advice.detachedHead=false clone --quiet --depth 1 --branch "$tag" "$url" "$dest"
  fi
}

# 2. the REPL
say "REPL at $TAG in $DIR/repl"
clone_at https://github.com/leanprover-community/repl "$DIR/repl" "$TAG"
(cd "$DIR/repl" && lake build)
REPL_BIN="$DIR/repl/.lake/build/bin/repl"
[[ -x "$REPL_BIN" ]] || { echo "[setup_lean] the REPL build produced no $REPL_BIN" >&2; exit 1; }

# 3. Mathlib with its prebuilt cache
say "Mathlib at $TAG in $DIR/mathlib (downloading the .olean cache)"
clone_at https://github.com/leanprover-community/mathlib4 "$DIR/mathlib" "$TAG"
(cd "$DIR/mathlib" && lake exe cache get)

REPL_TOOLCHAIN="$(tr -d '[:space:]' < "$DIR/repl/lean-toolchain")"
MATHLIB_TOOLCHAIN="$(tr -d '[:space:]' < "$DIR/mathlib/lean-toolchain")"
if [[ "$REPL_TOOLCHAIN" != "$MATHLIB_TOOLCHAIN" ]]; then
  echo "[setup_lean] toolchain mismatch: REPL $REPL_TOOLCHAIN, Mathlib $MATHLIB_TOOLCHAIN;" \
       "pick a tag both repositories have" >&2
  exit 1
fi

# The REPL runs in the Mathlib directory: there `lake env` finds the project and
# elan's lake picks the project's toolchain.  Absolute paths, so that the
# command works whatever PATH the caller has.
LAKE="$(command -v lake)"
REPL_ARGV=("$LAKE" env "$REPL_BIN")
COMMAND="$(printf '%q ' "${REPL_ARGV[@]}")"
COMMAND="${COMMAND% }"

# 4. smoke test: the REPL imports Mathlib, checks a proof and pickles its environment;
# the axiom checker (the only place its Lean code is compiled: no Lean where SGS is
# developed) reads the pickle and must find the theorem's axioms
CHECKER="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/lean_env/lean/SgsAxiomCheck.lean"
if [[ "$CHECK" == 1 ]]; then
  say "smoke test (imports Mathlib)"
  PICKLE="$(mktemp -d)/sgs_smoke.olean"
  REQUESTS="$(printf '%s\n\n%s\n\n%s\n\n' \
    '{"cmd": "import Mathlib"}' \
    '{"cmd": "theorem sgs_smoke (a b : ℕ) : a + b = b + a := by\n  omega", "env": 0}' \
    "{\"pickleTo\": \"$PICKLE\", \"env\": 1}")"
  if ! ANSWER="$(cd "$DIR/mathlib" && printf '%s\n\n' "$REQUESTS" | LEAN_NUM_THREADS=1 "${REPL_ARGV[@]}")" \
     || [[ "$ANSWER" == *'"severity": "error"'* || "$ANSWER" != *'"env": 1'* ]]; then
    echo "[setup_lean] smoke test failed; the REPL answered:" >&2
    echo "${ANSWER:-<nothing>}" >&2
    exit 1
  fi
  if ! CHECKED="$(cd "$DIR/mathlib" && "$LAKE" env lean --run "$CHECKER" smoke pickle "$PICKLE" sgs_smoke 2>&1)" \
     || [[ "$CHECKED" != *'SGS-AXIOMS smoke {"theorem":'* ]]; then
    echo "[setup_lean] the axiom checker ($CHECKER) failed on the REPL's pickle; it answered:" >&2
    echo "${CHECKED:-<nothing>}" >&2
    echo "  (prover.lean.axiom_check=repl reads #print axioms instead; docs/proof_checking.md)" >&2
    exit 1
  fi
  rm -rf "$(dirname "$PICKLE")"
  say "smoke test passed (axiom checker: ${CHECKED#*SGS-AXIOMS smoke })"
fi

cat <<EOF

Lean $REPL_TOOLCHAIN is ready.  The REPL runs in $DIR/mathlib.  Settings for SGS:

  Hydra overrides:   prover=lean prover.lean.repl_command='$COMMAND' prover.lean.project_dir=$DIR/mathlib prover.lean.lake_command=$LAKE
  or, for conf/prover/lean.yaml:
                     export SGS_LEAN_REPL='$COMMAND'
                     export SGS_LEAN_PROJECT=$DIR/mathlib
                     export SGS_LEAN_LAKE=$LAKE
  for LeanConfig.from_env() (tests, tools):
                     export LEAN_ENV_REPL_COMMAND='$COMMAND'
                     export LEAN_ENV_PROJECT_DIR=$DIR/mathlib
                     export LEAN_ENV_LAKE_COMMAND=$LAKE

EOF
